// What the runner scripts share: every warning and error the client logs, kept (and still
// printed), so that a test can fail on any of them.

export function captureConsole() {
  const logged = [];
  for (const level of ["warn", "error"]) {
    const original = console[level];
    console[level] = (...args) => {
      logged.push(`${level}: ${args.map(String).join(" ")}`);
      original.apply(console, args);
    };
  }
  return logged;
}
