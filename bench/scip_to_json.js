// Decode a SCIP index (index.scip) to JSON on stdout, with the protobuf classes scip-typescript itself ships.
// Used by bench/codenav_ts_bench.py; nothing of the index is interpreted here.
//   node bench/scip_to_json.js TOOLS_DIR index.scip
// TOOLS_DIR: the folder where `npm install @sourcegraph/scip-typescript` put node_modules.
"use strict";
const fs = require("fs");
const path = require("path");

const [toolsDir, indexPath] = process.argv.slice(2);
if (!toolsDir || !indexPath) {
  process.stderr.write("usage: node scip_to_json.js TOOLS_DIR index.scip\n");
  process.exit(2);
}
const { scip } = require(path.resolve(toolsDir, "node_modules/@sourcegraph/scip-typescript/dist/src/scip.js"));
const index = scip.Index.deserializeBinary(fs.readFileSync(indexPath));
const documents = index.documents.map((doc) => ({
  path: doc.relative_path,
  // range: [line, column, (end line,) end column], 0-based; roles: SymbolRole bits (1 = definition).
  occurrences: doc.occurrences.map((o) => [o.symbol, o.symbol_roles, o.range]),
}));
process.stdout.write(JSON.stringify({ documents }));
