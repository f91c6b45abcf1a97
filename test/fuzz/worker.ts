// A worker process of a fuzz run with several processes: applies each batch of operations it is
// sent to the reference copy and to the shadow, in order, and sends back both results of each.
import { apply, Op } from './ops';

export interface Batch {
  id: number;
  ops: Op[];
  ref: string;
  shadow: string;
}

export interface BatchResult {
  id: number;
  results: Array<[want: string, got: string]>;
}

process.on('message', (m: Batch) => {
  const results = m.ops.map((op): [string, string] => [apply(op, m.ref), apply(op, m.shadow)]);
  process.send?.({ id: m.id, results } satisfies BatchResult);
});
// The coordinator went away (finished, or died): nothing left to do.
process.on('disconnect', () => process.exit(0));
