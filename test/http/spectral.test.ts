import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { makeApp } from '../helpers.js';

// The ecosystem's standard linter, Spectral with its `spectral:oas` ruleset (the
// repository's .spectral.yaml), accepts the OpenAPI document without an error or a warning: the
// one the server serves and the committed openapi.json. The CLI is run as `npx spectral lint` runs it.

type Json = Record<string, unknown>;

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const SPECTRAL = join(ROOT, 'node_modules/@stoplight/spectral-cli/dist/index.js');
const RULESET = join(ROOT, '.spectral.yaml');
const COMMITTED = join(ROOT, 'openapi.json');

/** One finding of `spectral lint --format json`; severity 0 is an error, 1 a warning, 2 info, 3 a hint. */
interface Finding {
  readonly code: string;
  readonly message: string;
  readonly path: readonly (string | number)[];
  readonly severity: number;
  readonly source: string;
}

const SEVERITY = ['error', 'warning', 'info', 'hint'];
const show = (findings: readonly Finding[]): string =>
  findings.map((f) => `${SEVERITY[f.severity]} ${f.code} at ${f.path.join('.') || '(root)'}: ${f.message}`).join('\n');

function spectral(files: string[]): Promise<{ code: number; findings: Finding[]; stderr: string }> {
  return new Promise((resolve, reject) => {
    execFile(
      process.execPath,
      [SPECTRAL, 'lint', '--ruleset', RULESET, '--format', 'json', '--quiet', ...files],
      { cwd: ROOT, timeout: 60_000, maxBuffer: 16 * 1024 * 1024 },
      (error, stdout, stderr) => {
        const code = error ? (typeof error.code === 'number' ? error.code : 1) : 0;
        try {
          resolve({ code, findings: JSON.parse(stdout) as Finding[], stderr });
        } catch {
          reject(new Error(`spectral exited with ${code} without a JSON report: ${stdout}${stderr}`));
        }
      },
    );
  });
}

test('Spectral (spectral:oas) finds no error and no warning in the served document nor in openapi.json', async (t) => {
  const h = await makeApp();
  const dir = await mkdtemp(join(tmpdir(), 'plant-store-spectral-'));
  t.after(async () => {
    await h.close();
    await rm(dir, { recursive: true, force: true });
  });
  const response = await h.app.inject({ method: 'GET', url: '/openapi.json' });
  assert.equal(response.statusCode, 200);
  const document = response.json<Json>();
  const served = join(dir, 'served.json');
  await writeFile(served, JSON.stringify(document, null, 2));
  // A copy with two known faults: proves the ruleset is loaded and these rules are on, so that
  // the silence on the real documents means something.
  const faulty = join(dir, 'faulty.json');
  const { contact: _contact, ...info } = document.info as Json;
  const healthz = (document.paths as Record<string, Record<string, Json>>)['/healthz']!;
  const { description: _description, ...probe } = healthz.get!;
  await writeFile(
    faulty,
    JSON.stringify({ ...document, info, paths: { ...(document.paths as Json), '/healthz': { get: probe } } }),
  );

  const { code, findings, stderr } = await spectral([served, COMMITTED, faulty]);
  const of = (file: string): Finding[] => findings.filter((f) => f.source === file);
  assert.equal(
    findings.length,
    of(served).length + of(COMMITTED).length + of(faulty).length,
    `findings name the files linted: ${show(findings)}`,
  );

  assert.deepEqual(
    of(faulty)
      .map((f) => `${SEVERITY[f.severity]} ${f.code}`)
      .sort(),
    ['warning info-contact', 'warning operation-description'],
    `the faulty copy draws exactly its two warnings:\n${show(of(faulty))}\n${stderr}`,
  );
  const problems = (file: string): Finding[] => of(file).filter((f) => f.severity <= 1);
  assert.deepEqual(problems(served), [], `GET /openapi.json:\n${show(problems(served))}`);
  assert.deepEqual(problems(COMMITTED), [], `openapi.json:\n${show(problems(COMMITTED))}`);
  // Warnings do not fail `spectral lint` by default; errors would.
  assert.equal(code, 0, stderr);
});
