// ESLint flat config: typescript-eslint's type-checked rules over every workspace.
import js from '@eslint/js';
import globals from 'globals';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  // libs/client/src/openapi.ts is generated (openapi-typescript), checked by its own test.
  {
    ignores: [
      '**/dist/**',
      '**/node_modules/**',
      '.cache/**',
      '.data/**',
      'coverage/**',
      'libs/client/src/openapi.ts',
    ],
  },
  js.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/consistent-type-imports': 'error',
      'no-console': 'error',
    },
  },
  {
    files: ['**/*.test.ts', 'bench/**', 'scripts/**', '**/cli/**', 'examples/**'],
    rules: {
      'no-console': 'off',
      // Test doubles implement async interfaces without awaiting, and jest matchers take methods.
      '@typescript-eslint/require-await': 'off',
      '@typescript-eslint/unbound-method': 'off',
      // Asymmetric matchers (expect.any, expect.objectContaining) are typed any.
      '@typescript-eslint/no-unsafe-assignment': 'off',
    },
  },
  { files: ['**/*.js', '**/*.mjs'], ...tseslint.configs.disableTypeChecked },
  { files: ['examples/**/*.mjs', 'libs/client/scripts/*.mjs'], languageOptions: { globals: globals.node } },
  // The webhook portal's page script runs in the browser.
  { files: ['services/webhook-dispatcher/portal/*.js'], languageOptions: { globals: globals.browser } },
);
