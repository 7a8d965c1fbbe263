import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

// The routes import the bench's shared server code from ../ (outside this app), and the workspace
// packages resolve through the monorepo: let Next look from the repository root.
const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..', '..', '..');

/** @type {import('next').NextConfig} */
export default {
  turbopack: { root },
  outputFileTracingRoot: root,
};
