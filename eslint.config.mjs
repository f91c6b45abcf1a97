// Lint rules: typescript-eslint's recommended set plus the promise rules that matter for a
// file system driven from async code.
import tseslint from 'typescript-eslint';

const rules = {
  '@typescript-eslint/no-floating-promises': 'error',
  '@typescript-eslint/no-misused-promises': 'error',
  '@typescript-eslint/await-thenable': 'error',
};

export default tseslint.config(
  { ignores: ['dist/**', 'build/**', 'node_modules/**', 'examples/**', 'bin/**', 'eslint.config.mjs', 'extension/dist/**', 'extension/build.mjs', '.cache/**', 'test-output/**'] },
  ...tseslint.configs.recommended,
  {
    ignores: ['extension/**'],
    languageOptions: { parserOptions: { project: './tsconfig.json', tsconfigRootDir: import.meta.dirname } },
    rules,
  },
  {
    // The VS Code extension is its own package, type-checked with its own tsconfig.
    files: ['extension/**/*.ts'],
    languageOptions: { parserOptions: { project: './extension/tsconfig.json', tsconfigRootDir: import.meta.dirname } },
    rules,
  },
);
