// The files the attachment tests pick in the browser (the demo page's and CopilotKit's), made
// here: a real PNG (the chips show it as a thumbnail), a small PDF, a text file and a WAV of
// silence. Each as Playwright's file payload ({name, mimeType, buffer}).

import { deflateSync } from "node:zlib";

/** CRC-32 as PNG chunks want it (node:zlib has crc32 from Node 22 only). */
function crc32(bytes) {
  let crc = ~0;
  for (const byte of bytes) {
    crc ^= byte;
    for (let bit = 0; bit < 8; bit += 1) crc = (crc >>> 1) ^ (0xedb88320 & -(crc & 1));
  }
  return ~crc >>> 0;
}

function chunk(type, data) {
  const body = Buffer.concat([Buffer.from(type, "ascii"), data]);
  const length = Buffer.alloc(4);
  length.writeUInt32BE(data.length);
  const crc = Buffer.alloc(4);
  crc.writeUInt32BE(crc32(body));
  return Buffer.concat([length, body, crc]);
}

/** A `size`×`size` RGB PNG of a deterministic pattern that does not compress away. */
function png(size) {
  const header = Buffer.alloc(13);
  header.writeUInt32BE(size, 0);
  header.writeUInt32BE(size, 4);
  header.set([8, 2, 0, 0, 0], 8); // 8 bits, RGB, deflate, no filter method, no interlace
  const rows = [];
  let seed = 41;
  for (let y = 0; y < size; y += 1) {
    const row = Buffer.alloc(1 + 3 * size); // filter byte 0, then the pixels
    for (let x = 1; x < row.length; x += 1) {
      seed = (seed * 1103515245 + 12345) >>> 0;
      row[x] = (seed >>> 16) & 0xff;
    }
    rows.push(row);
  }
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    chunk("IHDR", header),
    chunk("IDAT", deflateSync(Buffer.concat(rows))),
    chunk("IEND", Buffer.alloc(0)),
  ]);
}

/** One page saying `text`, and enough of a body to weigh some kilobytes. */
function pdf(text) {
  const stream = `BT /F1 24 Tf 72 720 Td (${text}) Tj ET\n` + "% padding\n".repeat(1200);
  const objects = [
    "<< /Type /Catalog /Pages 2 0 R >>",
    "<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
    "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R " +
      "/Resources << /Font << /F1 5 0 R >> >> >>",
    `<< /Length ${stream.length} >>\nstream\n${stream}endstream`,
    "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
  ];
  let body = "%PDF-1.4\n";
  const offsets = objects.map((object, index) => {
    const at = body.length;
    body += `${index + 1} 0 obj\n${object}\nendobj\n`;
    return at;
  });
  const table = offsets.map((at) => `${String(at).padStart(10, "0")} 00000 n \n`).join("");
  body +=
    `xref\n0 ${objects.length + 1}\n0000000000 65535 f \n${table}` +
    `trailer\n<< /Size ${objects.length + 1} /Root 1 0 R >>\nstartxref\n${body.length}\n%%EOF\n`;
  return Buffer.from(body, "latin1");
}

/** `seconds` of 16-bit mono silence at 8 kHz. */
function wav(seconds) {
  const samples = 8000 * seconds;
  const header = Buffer.alloc(44);
  header.write("RIFF", 0, "ascii");
  header.writeUInt32LE(36 + 2 * samples, 4);
  header.write("WAVEfmt ", 8, "ascii");
  header.writeUInt32LE(16, 16);
  header.writeUInt16LE(1, 20); // PCM
  header.writeUInt16LE(1, 22); // mono
  header.writeUInt32LE(8000, 24);
  header.writeUInt32LE(16000, 28);
  header.writeUInt16LE(2, 32);
  header.writeUInt16LE(16, 34);
  header.write("data", 36, "ascii");
  header.writeUInt32LE(2 * samples, 40);
  return Buffer.concat([header, Buffer.alloc(2 * samples)]);
}

export const IMAGE = { name: "cat.png", mimeType: "image/png", buffer: png(40) };
export const PDF = { name: "report.pdf", mimeType: "application/pdf", buffer: pdf("Quarterly report") };
export const TEXT = {
  name: "notes.txt",
  mimeType: "text/plain",
  buffer: Buffer.from("Buy milk.\nCall Alice about the demo.\n".repeat(40)),
};
export const AUDIO = { name: "hello.wav", mimeType: "audio/wav", buffer: wav(1) };

/** Bytes as the scripted model and the demo's chips say them (1 KB = 1024 B). */
export function humanSize(bytes) {
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1024 * 1024) return `${Math.round(bytes / 1024)} KB`;
  return `${(bytes / (1024 * 1024)).toFixed(1)} MB`;
}

/** The base64 the page sends for a file. */
export const base64 = (file) => file.buffer.toString("base64");
