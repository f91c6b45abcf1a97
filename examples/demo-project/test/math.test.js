const test = require('node:test');
const assert = require('node:assert');
const { add, mean } = require('../src/math.js');

test('add adds', () => {
  assert.strictEqual(add(2, 3), 5);
});

test('mean averages', () => {
  assert.strictEqual(mean([1, 2, 3, 6]), 3);
});
