export { closeSSEStream, closeStandaloneSSEStream } from './streams/close.js';
export type { SSEStreamControls } from './streams/close.js';
