// Runs the WebAssembly loader's float16 conversions: node half_convert.mjs LOADER.js X.bin
// prints {"up": [value of every half bit pattern], "down": [half bits of each float32 in X]}.
import { readFileSync } from "node:fs";
const src = readFileSync(process.argv[2], "utf8");
const start = src.indexOf("function halfToFloat"), end = src.indexOf("async function bytesOf");
const code = src.slice(start, end) + "\nexport { halfToFloat, floatToHalf };";
const mod = await import("data:text/javascript," + encodeURIComponent(code));
const bytes = readFileSync(process.argv[3]);
const inputs = new Float32Array(bytes.buffer.slice(bytes.byteOffset,
                                                   bytes.byteOffset + bytes.length));
const out = { up: [], down: [] };
for (let h = 0; h < 65536; h++) out.up.push(mod.halfToFloat(h));
for (const x of inputs) out.down.push(mod.floatToHalf(x));
console.log(JSON.stringify({ up: out.up.map(String), down: out.down }));
