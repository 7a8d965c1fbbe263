// One lint setup for the whole workspace: the recommended JavaScript and TypeScript rules, plus a
// few that keep the engine readable. `pnpm lint:code` runs it; `npm test` and CI too.
import js from '@eslint/js';
import globals from 'globals';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  {
    ignores: ['**/node_modules/**', '**/dist/**', '**/.next/**', '**/.turbo/**', 'results/**', 'coverage/**', '**/next-env.d.ts'],
  },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: { globals: { ...globals.node }, ecmaVersion: 2022, sourceType: 'module' },
    rules: {
      // `_`-prefixed names are deliberately unused (an interface's parameter, a skipped element).
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrors: 'none' }],
      // A non-null assertion is allowed where a comment says why; the check is the reviewer's.
      '@typescript-eslint/no-non-null-assertion': 'off',
      eqeqeq: ['error', 'always'],
      'no-console': 'off',
      'prefer-const': 'error',
    },
  },
  {
    // A reader can hold a function, and a core module, in view.
    files: ['packages/{core,express,koa,next,redis}/src/**/*.ts'],
    rules: { 'max-lines-per-function': ['error', { max: 80 }] },
  },
  {
    files: ['packages/core/src/**/*.ts'],
    rules: { 'max-lines': ['error', { max: 350 }] },
  },
  {
    // The cluster reaches the engine as one strategy, chosen once (cluster/layer.ts): below
    // cluster/ nothing asks which mode runs (docs/design.md, "Layers"). The session layer asks the
    // mode through CopyRules, the engine through ClusterPort; a branch on the mode here is a bug.
    files: ['packages/core/src/{session,engine,modern}/**/*.ts'],
    rules: {
      'no-restricted-syntax': [
        'error',
        {
          selector: 'MemberExpression[property.name=/^(shared|owners|copies)$/]',
          message: 'A cluster mode branch below cluster/: ask the mode through ClusterPort (engine) or CopyRules (session).',
        },
        {
          selector: 'ObjectPattern > Property[key.name=/^(shared|owners|copies)$/]',
          message: 'A cluster mode branch below cluster/: ask the mode through ClusterPort (engine) or CopyRules (session).',
        },
        {
          selector: "BinaryExpression[operator='in'][left.value=/^(shared|owners|copies)$/]",
          message: 'A cluster mode branch below cluster/: ask the mode through ClusterPort (engine) or CopyRules (session).',
        },
      ],
    },
  },
  {
    // Tests and their testbed read untyped JSON off the wire and build fakes; `any` and `this` aliases are fine there.
    files: ['tests/**', 'packages/*/test/**', 'packages/testbed/src/**'],
    rules: { '@typescript-eslint/no-explicit-any': 'off', '@typescript-eslint/no-this-alias': 'off' },
  },
  {
    files: ['**/*.tsx', 'packages/bench/src/servers/next/**', 'apps/next-example/**'],
    languageOptions: { globals: { ...globals.browser, ...globals.node } },
  },
);
