#!/usr/bin/env node
// The package's command. The TypeScript is compiled to dist/ by `npm ci` (the prepare script).
import '../dist/cli.js';
