"""PyTorch definitions of the models rumor trains, for benchmarks and export tests.

Module attribute names are chosen so that ``state_dict()`` keys match the tensor
names rumor exports (``fc1.weight``, ``fc1.bias``, ``conv1.weight``, ...).  ReLU and
max-pooling are applied functionally so they add no entries to ``named_modules()``
and the parameter layout is exactly that of rumor's layers.

Model specs (on Fashion-MNIST's 1x28x28 images of 10 classes; data of one's own gives its own
input shape C,H,W and classes, which an export records as its "input" and "classes" metadata):
    logreg          fc1 (784 -> 10)
    mlp:W1,W2,...   fc1 (784 -> W1), ReLU, fc2 (W1 -> W2), ReLU, ..., fcN (-> 10)
    cnn             same as cnn:16,32
    cnn:C1,C2       conv1 (1 -> C1, 5x5), ReLU, maxpool 2, conv2 (C1 -> C2, 5x5),
                    ReLU, maxpool 2, flatten, fc1 (C2*16 -> 10)

build_model(meta["model"], meta["input"], meta["classes"]) builds the model of an export.

This module imports torch, so a caller that needs to control BLAS/OpenMP thread
counts must set the environment before importing it.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

IN_FEATURES = 28 * 28
IMAGE_SHAPE = (1, 28, 28)
NUM_CLASSES = 10
CNN_DEFAULT = (16, 32)


def _int_list(text, spec):
    try:
        vals = [int(v) for v in text.split(",") if v.strip() != ""]
    except ValueError:
        raise ValueError("bad model spec %r: widths must be integers" % spec)
    if not vals or any(v <= 0 for v in vals):
        raise ValueError("bad model spec %r: widths must be positive" % spec)
    return vals


def parse_spec(spec):
    """Return (kind, params) for a model spec string.

    kind is "logreg", "mlp" or "cnn"; params is () for logreg, the hidden widths
    for mlp, and (C1, C2) for cnn.
    """
    spec = spec.strip()
    kind, _, rest = spec.partition(":")
    kind = kind.lower()
    if kind == "logreg":
        if rest:
            raise ValueError("bad model spec %r: logreg takes no parameters" % spec)
        return "logreg", ()
    if kind == "mlp":
        if not rest:
            raise ValueError("bad model spec %r: mlp needs widths, e.g. mlp:256,128" % spec)
        return "mlp", tuple(_int_list(rest, spec))
    if kind == "cnn":
        if not rest:
            return "cnn", CNN_DEFAULT
        chans = _int_list(rest, spec)
        if len(chans) != 2:
            raise ValueError("bad model spec %r: cnn takes two channel counts" % spec)
        return "cnn", tuple(chans)
    raise ValueError("unknown model %r (expected logreg, mlp:W1,W2,... or cnn[:C1,C2])" % spec)


def canonical_spec(spec):
    """Spec string with defaults filled in, e.g. "cnn" -> "cnn:16,32"."""
    kind, params = parse_spec(spec)
    if kind == "logreg":
        return "logreg"
    return "%s:%s" % (kind, ",".join(str(p) for p in params))


class LogReg(nn.Module):
    """Multinomial logistic regression: a single linear layer on the flat image."""

    def __init__(self, shape=IMAGE_SHAPE, classes=NUM_CLASSES):
        super().__init__()
        self.features = shape[0] * shape[1] * shape[2]
        self.fc1 = nn.Linear(self.features, classes)

    def forward(self, x):
        return self.fc1(x.reshape(x.shape[0], self.features))


class MLP(nn.Module):
    """Fully connected net; layers are attributes fc1..fcN so names match rumor's."""

    def __init__(self, hidden, shape=IMAGE_SHAPE, classes=NUM_CLASSES):
        super().__init__()
        self.features = shape[0] * shape[1] * shape[2]
        widths = [self.features] + list(hidden) + [classes]
        self.n_layers = len(widths) - 1
        for i in range(self.n_layers):
            # setattr registers the submodule under the exact name "fc<i+1>";
            # an nn.Sequential would name them "0", "1", ... instead.
            setattr(self, "fc%d" % (i + 1), nn.Linear(widths[i], widths[i + 1]))

    def layers(self):
        return [getattr(self, "fc%d" % (i + 1)) for i in range(self.n_layers)]

    def forward(self, x):
        x = x.reshape(x.shape[0], self.features)
        layers = self.layers()
        for layer in layers[:-1]:
            x = F.relu(layer(x))
        return layers[-1](x)


class CNN(nn.Module):
    """Two 5x5 valid convolutions with 2x2 max-pooling, then one linear layer.

    28x28 -> conv 24x24 -> pool 12x12 -> conv 8x8 -> pool 4x4, hence C2*16 features (an
    H x W input: ((H - 4) // 2 - 4) // 2 rows of them, likewise columns).
    """

    def __init__(self, c1=CNN_DEFAULT[0], c2=CNN_DEFAULT[1], shape=IMAGE_SHAPE, classes=NUM_CLASSES):
        super().__init__()
        self.shape = tuple(shape)
        h, w = ((shape[1] - 4) // 2 - 4) // 2, ((shape[2] - 4) // 2 - 4) // 2
        self.conv1 = nn.Conv2d(shape[0], c1, kernel_size=5)
        self.conv2 = nn.Conv2d(c1, c2, kernel_size=5)
        self.fc1 = nn.Linear(c2 * h * w, classes)

    def forward(self, x):
        x = x.reshape(x.shape[0], *self.shape)
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc1(x.flatten(1))


def build_model(spec, shape=IMAGE_SHAPE, classes=NUM_CLASSES):
    """Construct the nn.Module for a model spec string (see module docstring) on inputs of shape
    (C, H, W) and that many classes; both may be an export's metadata strings ("3,20,20", "4")."""
    if isinstance(shape, str):
        shape = tuple(int(v) for v in shape.split(","))
    classes = int(classes)
    kind, params = parse_spec(spec)
    if kind == "logreg":
        return LogReg(shape, classes)
    if kind == "mlp":
        return MLP(params, shape, classes)
    return CNN(*params, shape=shape, classes=classes)


def input_shape(spec, batch):
    """Shape of one input batch as the model is fed by the benchmark."""
    kind, _ = parse_spec(spec)
    if kind == "cnn":
        return (batch,) + IMAGE_SHAPE
    return (batch, IN_FEATURES)
