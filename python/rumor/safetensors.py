"""rumor.safetensors: a safetensors file (a model rumor exports: `rumor train --save`, a node's
run-dir/model.safetensors) into a PyTorch state_dict, with only the standard library and torch.

Debian's python3-torch (1.13) has no safetensors support and the ``safetensors`` package may
not be installable, so this module reads the format itself:

    from rumor.safetensors import load
    state_dict, metadata = load("model.safetensors")
    model.load_state_dict(state_dict)

The metadata holds what a model of rumor's needs beside its tensors: "model" (its spec),
"input_mean" and "input_std" (the normalisation rumor's trainer applies to inputs scaled to
[0, 1]), "seed". From the source tree, tools/safetensors_torch.py is this module.

Floating-point tensors (F64, F32, F16, BF16) come back as float32; integer and bool
tensors keep their type (``load_state_dict`` copies into each parameter's own dtype).

The file is checked the way rumor's C reader checks it (src/ml/safetensors.c): header length
within bounds and within the file, header valid UTF-8 JSON without repeated keys, known
dtypes, shapes of non-negative integers, and tensors that tile the data area exactly,
each exactly dtype size * product(shape) bytes. Any problem raises SafetensorsError
("<path>: <reason>"). The C reader's storage limits (names under 128 bytes, metadata
keys under 64 and values under 256, at most 4096 tensors, files up to 4 GiB) are not
enforced here, so files from other tools load too.

Command line (python3 -m rumor.safetensors, or tools/safetensors_torch.py):
    MODEL.safetensors            list tensors and metadata
    MODEL.safetensors -o OUT.pt  also torch.save the state_dict
"""

import argparse
import json
import os
import struct
import sys

MAX_HEADER = 16 << 20  # RUMOR_ST_MAX_HEADER
METADATA_KEY = "__metadata__"

# Byte size of each dtype in the published format, sub-byte types left out.
DTYPE_SIZES = {
    "BOOL": 1, "U8": 1, "I8": 1, "F8_E5M2": 1, "F8_E4M3": 1, "F8_E8M0": 1,
    "I16": 2, "U16": 2, "F16": 2, "BF16": 2,
    "I32": 4, "U32": 4, "F32": 4,
    "I64": 8, "U64": 8, "F64": 8, "C64": 8,
}
FLOAT_DTYPES = ("F64", "F32", "F16", "BF16")


class SafetensorsError(ValueError):
    """A file that is not a valid safetensors file, or holds a dtype this loader cannot map."""


def _check_string(s):
    # json.loads accepts "\u0000" and lone surrogates ("\ud800"); the C reader refuses both
    # (a NUL would cut a C string short, a lone surrogate is not Unicode).
    if "\0" in s:
        raise SafetensorsError("string with a NUL character")
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        raise SafetensorsError("string with a lone surrogate escape") from None


def _object_hook(pairs):
    # json.loads keeps the last of repeated keys silently; the C reader refuses them, and so
    # does this one, so that both always see the same tensors.
    out = {}
    for key, value in pairs:
        _check_string(key)
        if isinstance(value, str):
            _check_string(value)
        if key in out:
            raise SafetensorsError("repeated key '%s'" % key)
        out[key] = value
    return out


def _reject_constant(name):
    raise SafetensorsError("non-standard JSON constant %s" % name)


def _is_count(x):
    return type(x) is int and x >= 0  # bool is not int here; 2.0 is not an integer


def read_header(path):
    """Validate path's header and return (tensors, metadata, data_start).

    tensors is a list, in header order, of dicts with name, dtype, shape (tuple),
    begin, end (offsets into the data area); metadata a dict of str -> str; data_start
    the file offset of the data area. Needs no torch.
    """
    def fail(reason):
        return SafetensorsError("%s: %s" % (path, reason))

    with open(path, "rb") as f:
        file_len = os.fstat(f.fileno()).st_size
        head = f.read(8)
        if len(head) < 8:
            raise fail("truncated: %d bytes, too short for the 8-byte header length" % len(head))
        (hlen,) = struct.unpack("<Q", head)
        if hlen < 2:
            raise fail("header length %d is too short for a JSON object" % hlen)
        if hlen > MAX_HEADER:
            raise fail("header length %d is over the limit of %d bytes" % (hlen, MAX_HEADER))
        if hlen > file_len - 8:
            raise fail("truncated: header says %d bytes but file has %d after the length"
                       % (hlen, file_len - 8))
        raw = f.read(hlen)
        if len(raw) != hlen:
            raise fail("file shrank while being read")
    data_start = 8 + hlen
    data_len = file_len - data_start

    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise fail("header is not valid UTF-8 (byte %d)" % e.start) from None
    try:
        header = json.loads(text, object_pairs_hook=_object_hook,
                            parse_constant=_reject_constant)
    except SafetensorsError as e:
        raise fail("header: %s" % e) from None
    except ValueError as e:
        raise fail("header is not valid JSON (%s)" % e) from None
    if not isinstance(header, dict):
        raise fail("header is a JSON %s, not an object"
                   % ("array" if isinstance(header, list) else "scalar"))

    metadata = {}
    tensors = []
    for name, entry in header.items():
        if name == METADATA_KEY:
            if not isinstance(entry, dict):
                raise fail("%s is not an object" % METADATA_KEY)
            for key, value in entry.items():
                if not isinstance(value, str):
                    raise fail("%s '%s' is not a string" % (METADATA_KEY, key))
            metadata = dict(entry)
            continue
        where = "tensor '%s'" % name
        if not isinstance(entry, dict):
            raise fail("%s: entry is not an object" % where)
        dtype = entry.get("dtype")
        if not isinstance(dtype, str):
            raise fail("%s: dtype missing or not a string" % where)
        if dtype not in DTYPE_SIZES:
            raise fail("%s: unknown dtype '%s'" % (where, dtype))
        shape = entry.get("shape")
        if not isinstance(shape, list):
            raise fail("%s: shape missing or not an array" % where)
        for d, dim in enumerate(shape):
            if not _is_count(dim):
                raise fail("%s: shape dim %d is not a non-negative integer" % (where, d))
        offsets = entry.get("data_offsets")
        if not (isinstance(offsets, list) and len(offsets) == 2 and all(map(_is_count, offsets))):
            raise fail("%s: data_offsets must be two non-negative integers" % where)
        begin, end = offsets
        if begin > end:
            raise fail("%s: data_offsets [%d, %d] begin after end" % (where, begin, end))
        nbytes = DTYPE_SIZES[dtype]
        for dim in shape:
            nbytes *= dim
        if end - begin != nbytes:
            raise fail("%s: data_offsets [%d, %d] disagree with %s shape [%s] (%d bytes)"
                       % (where, begin, end, dtype, ", ".join(map(str, shape)), nbytes))
        if end > data_len:
            raise fail("%s: data_offsets [%d, %d] run past the data area (%d bytes)"
                       % (where, begin, end, data_len))
        tensors.append({"name": name, "dtype": dtype, "shape": tuple(shape),
                        "begin": begin, "end": end})

    # Sorted by offset, the tensors must tile [0, data_len): no gap, no overlap.
    at, prev = 0, None
    for t in sorted(tensors, key=lambda t: (t["begin"], t["end"])):
        if t["begin"] < at:
            raise fail("tensor '%s' [%d, %d] overlaps tensor '%s' [%d, %d]"
                       % (t["name"], t["begin"], t["end"], prev["name"], prev["begin"], prev["end"]))
        if t["begin"] > at:
            raise fail("gap of %d bytes in the data area before tensor '%s'"
                       % (t["begin"] - at, t["name"]))
        at, prev = t["end"], t
    if at != data_len:
        raise fail("%d bytes at the end of the data area belong to no tensor" % (data_len - at))
    return tensors, metadata, data_start


def load(path, float_dtype=None):
    """Read path into (state_dict, metadata).

    state_dict maps names (in file order) to tensors that own their memory; floating-point
    tensors are converted to float_dtype (default torch.float32). metadata is the file's
    "__metadata__" as a dict of str -> str, empty when absent.
    """
    import torch

    if sys.byteorder != "little":
        raise NotImplementedError("safetensors data is little-endian; this loader needs a "
                                  "little-endian host")
    if float_dtype is None:
        float_dtype = torch.float32
    torch_dtypes = {
        "F64": torch.float64, "F32": torch.float32, "F16": torch.float16,
        "BF16": torch.bfloat16, "I64": torch.int64, "I32": torch.int32,
        "I16": torch.int16, "I8": torch.int8, "U8": torch.uint8, "BOOL": torch.bool,
    }
    tensors, metadata, data_start = read_header(path)
    for t in tensors:
        if t["dtype"] not in torch_dtypes:
            raise SafetensorsError("%s: tensor '%s': dtype %s has no torch %s equivalent"
                                   % (path, t["name"], t["dtype"], torch.__version__))
    state_dict = {}
    with open(path, "rb") as f:
        for t in tensors:
            dtype = torch_dtypes[t["dtype"]]
            nbytes = t["end"] - t["begin"]
            if nbytes == 0:
                tensor = torch.empty(t["shape"], dtype=dtype)
            else:
                # One fresh bytearray per tensor: aligned, writable (frombuffer warns on
                # read-only buffers) and owned by that tensor alone.
                buf = bytearray(nbytes)
                f.seek(data_start + t["begin"])
                if f.readinto(buf) != nbytes:
                    raise SafetensorsError("%s: file shrank while being read" % path)
                tensor = torch.frombuffer(buf, dtype=dtype).reshape(t["shape"])
            if t["dtype"] in FLOAT_DTYPES and dtype != float_dtype:
                tensor = tensor.to(float_dtype)
            state_dict[t["name"]] = tensor
    return state_dict, metadata


def main(argv=None):
    parser = argparse.ArgumentParser(description="Read a safetensors file into a torch state_dict.")
    parser.add_argument("path", help="a .safetensors file")
    parser.add_argument("-o", "--output", help="torch.save the state_dict (float32) to this file")
    args = parser.parse_args(argv)
    try:
        if args.output:
            import torch
            state_dict, metadata = load(args.path)
            listing = [(name, str(t.dtype).replace("torch.", ""), tuple(t.shape))
                       for name, t in state_dict.items()]
            torch.save(state_dict, args.output)
        else:
            tensors, metadata, _ = read_header(args.path)
            listing = [(t["name"], t["dtype"], t["shape"]) for t in tensors]
    except (OSError, SafetensorsError, NotImplementedError) as e:
        print("safetensors: %s" % e, file=sys.stderr)
        return 1
    for key, value in metadata.items():
        print("# %s = %s" % (key, value))
    for name, dtype, shape in listing:
        print("%s %s [%s]" % (name, dtype, ", ".join(map(str, shape))))
    if args.output:
        print("saved %d tensors to %s" % (len(listing), args.output))
    return 0


if __name__ == "__main__":
    sys.exit(main())
