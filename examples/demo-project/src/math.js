// Small functions with tests, so a change made in a shadow can visibly break them.
function add(a, b) {
  return a + b;
}

function mean(values) {
  if (values.length === 0) throw new Error('mean of nothing');
  return values.reduce(add, 0) / values.length;
}

module.exports = { add, mean };
