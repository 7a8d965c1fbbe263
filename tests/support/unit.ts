/**
 * The `unit` project's setup: its tests promise to pass on a machine with only Node and the
 * installed dependencies, so any process a test starts through the testbed (a redis-server, an
 * example app, `next start`, Python) fails the test at once and says where the file belongs.
 */
import { refuseProcesses } from '@mcp-kit/testbed/processes';

refuseProcesses(
  'a test of the unit project starts no process (it runs without a build, redis-server, Python or Chromium): ' +
    'list its file in the build or redis project (tests/projects.ts)',
);
