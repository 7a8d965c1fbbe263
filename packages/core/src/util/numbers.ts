/** Validates an option that counts something: an integer ≥ 1. `owner` names the API in the message. */
export function positiveInt(value: number, name: string, owner: string): number {
  if (!Number.isInteger(value) || value < 1) throw new RangeError(`${owner}: ${name} must be a positive integer, got ${String(value)}`);
  return value;
}

/** Validates a duration option in ms: an integer ≥ 0. */
export function nonNegativeInt(value: number, name: string, owner: string): number {
  if (!Number.isInteger(value) || value < 0) {
    throw new RangeError(`${owner}: ${name} must be a non-negative integer (ms), got ${String(value)}`);
  }
  return value;
}
