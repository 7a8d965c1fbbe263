/**
 * vitest's side of the testbed: every process a test starts through @mcp-kit/testbed is labelled
 * with the test that started it (`ps` shows `redis-server 127.0.0.1:PORT
 * started-by:tests/…test.ts>its name`; a process left running at the end names it on stderr).
 */
import { relative } from 'node:path';
import { expect } from 'vitest';
import { refuseProcesses, setStartedBy } from '@mcp-kit/testbed/processes';

setStartedBy(() => {
  const state = expect.getState();
  return `${relative(process.cwd(), state.testPath ?? 'unknown')}${state.currentTestName ? `>${state.currentTestName}` : ''}`;
});

// Processes are allowed unless the project's own setup (tests/support/unit.ts) refuses them: a
// worker may run files of several projects one after another.
refuseProcesses(undefined);
