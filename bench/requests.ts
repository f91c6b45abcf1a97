// FUSE request counts per workload for the shadowfs contenders of `npm run bench`: the delta of
// Shadow.requestCounts() across a workload's measured runs. The kinds are whatever the backend
// reports (fuse_ll names its requests; a backend that does not count reports none), so new kinds
// show up without a change here. No side effects on import.

export type Counts = Record<string, number>;

/** after - before, kind by kind (a kind only in `after` counts from 0); zero deltas left out. */
export function countsDelta(before: Counts, after: Counts): Counts {
  const out: Counts = {};
  for (const [kind, n] of Object.entries(after)) {
    const d = n - (before[kind] ?? 0);
    if (d !== 0) out[kind] = d;
  }
  return out;
}

/** One contender's requests on one workload: the total over `runs` measured runs. */
export interface WorkloadCounts {
  runs: number;
  total: Counts;
}

/** contender → workload → counts, in the order workloads ran. */
export type RequestCounts = Record<string, Record<string, WorkloadCounts>>;

/** Adds one measured run's delta to `into` (the store bench.ts keeps). */
export function addRun(into: RequestCounts, contender: string, workload: string, delta: Counts): void {
  const w = ((into[contender] ??= {})[workload] ??= { runs: 0, total: {} });
  w.runs++;
  for (const [kind, n] of Object.entries(delta)) w.total[kind] = (w.total[kind] ?? 0) + n;
}

/** Requests of one run (the mean over the measured runs), rounded. */
export function perRun(w: WorkloadCounts): Counts {
  const out: Counts = {};
  for (const [kind, n] of Object.entries(w.total)) out[kind] = Math.round(n / Math.max(1, w.runs));
  return out;
}

const short = (n: number): string => (n >= 10_000 ? `${Math.round(n / 1000)}k` : String(n));

/** "lookup 5000, getattr 120, …": the kinds of one run, most frequent first. */
export function countsLine(c: Counts, max = 6): string {
  const kinds = Object.entries(c).sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]));
  if (!kinds.length) return 'no FUSE requests counted';
  const shown = kinds.slice(0, max).map(([k, n]) => `${k} ${short(n)}`);
  return shown.join(', ') + (kinds.length > max ? `, … (${kinds.length - max} more kinds)` : '');
}

/** One Markdown table per contender: workload × request kind, requests per measured run. */
export function requestCountsMarkdown(counts: RequestCounts): string[] {
  const out = [
    '## FUSE requests per workload run',
    '',
    "Each shadowfs contender's FUSE requests by kind (`Shadow.requestCounts()`), the change across a workload's measured runs divided by their number (warm-up runs not included). Kinds are those the backend reports.",
  ];
  for (const [contender, byWorkload] of Object.entries(counts)) {
    const rows = Object.entries(byWorkload);
    const totals: Counts = {};
    for (const [, w] of rows) for (const [k, n] of Object.entries(w.total)) totals[k] = (totals[k] ?? 0) + n;
    const kinds = Object.keys(totals).sort((a, b) => totals[b] - totals[a] || a.localeCompare(b));
    out.push('', `### ${contender}`, '');
    if (!kinds.length) {
      out.push('No requests counted (this backend does not count them).');
      continue;
    }
    out.push(`| workload | ${kinds.join(' | ')} |`, `| --- | ${kinds.map(() => '---:').join(' | ')} |`);
    for (const [workload, w] of rows) {
      const c = perRun(w);
      out.push(`| ${workload} | ${kinds.map((k) => String(c[k] ?? 0)).join(' | ')} |`);
    }
  }
  return out;
}
