"""README, "Using it": a trained model in a notebook or a service (the tests run this file).

python docs/examples/use_a_checkpoint.py runs/MNIST-MnistCNN/version_0/checkpoints/last.ckpt digit.png
"""

import sys

from PIL import Image

from models import load

checkpoint, photo = sys.argv[1:3]
model = load(checkpoint)  # eval mode; the network, its classes and normalization come from the file
for name, probability in model.predict_image(Image.open(photo), top=3):
    print(f"{name}: {probability:.3f}")
