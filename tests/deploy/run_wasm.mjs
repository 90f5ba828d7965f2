// Runs an ember WebAssembly module in Node.js: node run_wasm.mjs MODEL.js IN_DIR OUT_DIR REPEAT
// reads IN_DIR/<input name>.bin, writes OUT_DIR/<output index>.bin, prints {"seconds": [...]}.
import { readFile, writeFile } from "node:fs/promises";
import { pathToFileURL } from "node:url";

const [modelPath, inDir, outDir, repeat = "1"] = process.argv.slice(2);
const { load } = await import(pathToFileURL(modelPath).href);
const model = await load();
const ARRAYS = { float32: Float32Array, int64: BigInt64Array, int32: Int32Array,
                 float16: Uint16Array };
const feeds = {};
for (const spec of model.inputs) {
  const bytes = await readFile(`${inDir}/${spec.name}.bin`);
  feeds[spec.name] = new ARRAYS[spec.dtype](bytes.buffer.slice(bytes.byteOffset,
                                                              bytes.byteOffset + bytes.length));
}
const seconds = [];
let outputs;
for (let r = 0; r < Number(repeat); r++) {
  const start = performance.now();
  outputs = model.run(feeds);
  seconds.push((performance.now() - start) / 1000);
}
for (const [index, spec] of model.outputs.entries()) {
  await writeFile(`${outDir}/${index}.bin`, new Uint8Array(outputs[spec.name].buffer));
}
console.log(JSON.stringify({ seconds, simd: model.simd }));
