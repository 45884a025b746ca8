import { mkdtemp, readdir, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MIN_SECRET_LENGTH } from '../config';
import { localOperationIdSecret, OPERATION_ID_SECRET_FILE } from './operation-id-secret';

/**
 * `npm start` and the gateway command keep their operation-id secret in their state folder: ids issued before a
 * restart must verify after it, and two processes started at once on one folder (a second `npm start`, the gateway
 * beside it) must not each sign with a secret of their own.
 */
describe("a local run's operation-id secret", () => {
  let root: string;
  beforeAll(async () => {
    root = await mkdtemp(join(tmpdir(), 'operation-id-secret-'));
  });
  afterAll(() => rm(root, { recursive: true, force: true }));

  it('is made on the first start, kept owner-only, and the same after a restart', async () => {
    const dir = join(root, 'restart', 'state');
    const first = await localOperationIdSecret(dir);
    expect(first.length).toBeGreaterThanOrEqual(MIN_SECRET_LENGTH);
    expect(await localOperationIdSecret(dir)).toBe(first);
    expect((await readFile(join(dir, OPERATION_ID_SECRET_FILE), 'utf8')).trim()).toBe(first);
    expect((await stat(join(dir, OPERATION_ID_SECRET_FILE))).mode & 0o777).toBe(0o600);
  });

  it('starts racing on one folder all get the one secret that is on disk, and no draft is left behind', async () => {
    const dir = join(root, 'race');
    const secrets = await Promise.all(Array.from({ length: 12 }, () => localOperationIdSecret(dir)));
    const onDisk = (await readFile(join(dir, OPERATION_ID_SECRET_FILE), 'utf8')).trim();
    expect(new Set(secrets)).toEqual(new Set([onDisk]));
    expect(await readdir(dir)).toEqual([OPERATION_ID_SECRET_FILE]);
  });
});
