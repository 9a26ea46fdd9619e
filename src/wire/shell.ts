/**
 * `word` as one word of a POSIX shell command line: as it is when it holds only characters no shell
 * reads specially, else in single quotes (a quote inside written '\''). For the commands the
 * service prints for a person to run (the createdb hint, the CLI's paging hint).
 */
export const shellWord = (word: string): string =>
  /^[A-Za-z0-9_@%+=:,./-]+$/.test(word) ? word : `'${word.replaceAll("'", `'\\''`)}'`;
