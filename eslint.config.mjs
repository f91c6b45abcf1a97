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
    // What differs between OSes lives in src/platform/ (one module per OS behind one interface);
    // everything else asks `platform`. Tests (which skip per OS) and the extension are exempt.
    files: ['src/**/*.ts'],
    ignores: ['src/platform/**'],
    rules: {
      'no-restricted-syntax': [
        'error',
        {
          selector: "MemberExpression[object.name='process'][property.name='platform']",
          message: "process.platform belongs in src/platform/: ask `platform` (import { platform } from '../platform') instead",
        },
      ],
    },
  },
  {
    // The VS Code extension is its own package, type-checked with its own tsconfig.
    files: ['extension/**/*.ts'],
    languageOptions: { parserOptions: { project: './extension/tsconfig.json', tsconfigRootDir: import.meta.dirname } },
    rules,
  },
);
