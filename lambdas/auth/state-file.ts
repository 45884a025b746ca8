import { randomUUID } from 'node:crypto';
import { link, mkdir, readFile, unlink, writeFile } from 'node:fs/promises';
import { dirname } from 'node:path';

/**
 * A file a local run makes once and then keeps (the dev issuer's key pair, the operation-id secret): its contents if
 * it exists, else `make()`'s, written whole under a name of its own and then linked into place. A process reading it
 * never sees it half written, and when two processes start at once the first link wins and both use its contents.
 */
export async function readOrCreateStateFile(file: string, make: () => string | Promise<string>): Promise<string> {
  try {
    return await readFile(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
  await mkdir(dirname(file), { recursive: true, mode: 0o700 });
  const contents = await make();
  const draft = `${file}.${randomUUID()}.tmp`;
  await writeFile(draft, contents, { flag: 'wx', mode: 0o600 });
  try {
    await link(draft, file);
    return contents;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    return readFile(file, 'utf8');
  } finally {
    await unlink(draft).catch(() => {});
  }
}
