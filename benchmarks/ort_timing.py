"""Time an ONNX model in onnxruntime with one thread and write its first output: run by
deploy.py under an aarch64 Python in qemu-user, so it needs only numpy and onnxruntime.

    python ort_timing.py MODEL.onnx IN_DIR OUT.bin RUNS      # prints the median seconds
"""

import sys
import time

import numpy as np
import onnxruntime as ort


def main(model_path: str, in_dir: str, out_path: str, runs: int) -> None:
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    session = ort.InferenceSession(model_path, options, providers=["CPUExecutionProvider"])
    feeds = {}
    for spec in session.get_inputs():
        shape = [int(d) for d in spec.shape]
        feeds[spec.name] = np.fromfile(f"{in_dir}/{spec.name}.bin", np.float32).reshape(shape)
    out = session.run(None, feeds)[0]  # the first run plans memory: not timed
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        out = session.run(None, feeds)[0]
        samples.append(time.perf_counter() - start)
    np.ascontiguousarray(out, np.float32).tofile(out_path)
    print(float(np.median(samples)), ort.__version__)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]))
