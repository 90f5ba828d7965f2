// Picks an image, resizes it to the model's input, normalizes it as ImageNet models expect,
// runs the WebAssembly model and shows the top-5 classes and the time it took.
import { load } from "./model/model.js";

const MEAN = [0.485, 0.456, 0.406];
const STD = [0.229, 0.224, 0.225];
const status = document.getElementById("status");
const canvas = document.getElementById("preview");

const model = await load();
const spec = model.inputs[0];
const [, channels, height, width] = spec.shape;
canvas.width = width;
canvas.height = height;
let labels = null;
try {
  const response = await fetch("./model/labels.json");
  if (response.ok) labels = await response.json();
} catch { /* class numbers then */ }
status.textContent = `model ${model.name} ready: input ${spec.shape.join("×")}`;
window.emberReady = true;

function pixels(image) {
  const context = canvas.getContext("2d", { willReadFrequently: true });
  context.drawImage(image, 0, 0, width, height);
  const rgba = context.getImageData(0, 0, width, height).data;
  const planar = new Float32Array(channels * height * width);
  for (let c = 0; c < channels; c++) {
    for (let i = 0; i < height * width; i++) {
      planar[c * height * width + i] = (rgba[4 * i + c] / 255 - MEAN[c]) / STD[c];
    }
  }
  return planar;
}

function classify(image) {
  const input = pixels(image);
  const start = performance.now();
  const outputs = model.run({ [spec.name]: input });
  const ms = performance.now() - start;
  const scores = Object.values(outputs)[0];
  const top = [...scores.keys()].sort((a, b) => scores[b] - scores[a]).slice(0, 5);
  document.getElementById("results").innerHTML = top.map((k) =>
    `<li>${labels ? labels[k] : `class ${k}`} <span class="muted">(${scores[k].toFixed(3)})` +
    `</span></li>`).join("");
  status.textContent = `${model.name}: ${ms.toFixed(1)} ms in WebAssembly (${model.simd})`;
  window.emberResult = { input: Array.from(input), scores: Array.from(scores), top, ms,
                         simd: model.simd };
}

document.getElementById("file").addEventListener("change", (event) => {
  const file = event.target.files[0];
  if (!file) return;
  const image = new Image();
  image.onload = () => classify(image);
  image.src = URL.createObjectURL(file);
});
