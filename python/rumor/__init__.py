"""rumor: one peer of a rumor swarm inside your own training loop.

A swarm trains a model without a server: each peer trains on its own data and, at every
gossip point, averages its parameters with its neighbours' over encrypted, authenticated
links (CurveZMQ; only peers with a certificate of the swarm's authority are let in).

    import numpy as np, rumor

    with rumor.Peer(key="p0.key", cert="p0.cert", swarm="authority.pub",
                    listen="tcp://0.0.0.0:7000", bootstrap="rumor://KEY@10.0.0.1:7000",
                    algo="diloco:50") as peer:
        params = peer.register({"w": w0, "b": b0})   # float32 views the peer mixes in place
        peer.start()
        for _ in range(rounds):
            steps, _ = peer.phase()
            for _ in range(steps):
                train_step(params)                      # your optimizer, on the views
            peer.round()                                # the gossip point

Settings are rumor node's, by name (`local_steps=5` is `local-steps = 5`); a setting a library
peer does not take (rumor's own trainer's: lr, model, dp ...) is refused with the reason.
`rumor.torch.Optimizer` wraps a torch optimizer so that `step()` does all of the above.
"""
import os as _os
import time as _time

from ._rumor_cffi import ffi as _ffi, lib as _lib

__all__ = ["Peer", "Round", "RumorError", "SettingError", "LayoutError", "ClosedError", "StateError",
           "AuthError", "RumorTimeout", "NotSupported", "settings_text", "set_log", "version",
           "protocol_version"]

if _lib.rumor_abi_version() != _lib.RUMOR_ABI_VERSION:
    raise ImportError("rumor: this package was built for librumor.so.%d, and librumor.so.%d was loaded: "
                      "rebuild the package" % (_lib.RUMOR_ABI_VERSION, _lib.rumor_abi_version()))

version = _ffi.string(_lib.rumor_version(_ffi.NULL, _ffi.NULL, _ffi.NULL)).decode()
protocol_version = _lib.rumor_protocol_version()

_SLICE_MS = 100  # blocking calls run in slices this long, so that Ctrl-C and timeouts work


class RumorError(Exception):
    """An error of librumor: .code (rumor_err_t) and .message (what is wrong and what to do)."""

    def __init__(self, code, message):
        super().__init__(message)
        self.code = code
        self.message = message


class SettingError(RumorError, ValueError):
    """A setting or argument that is not right (RUMOR_EINVAL)."""


class LayoutError(RumorError):
    """Tensors that do not fit: the message names the first that differs (RUMOR_ELAYOUT)."""


class ClosedError(RumorError):
    """The peer is closed, or its node ended (RUMOR_ECLOSED)."""


class StateError(RumorError):
    """A call out of order, or in a process that did not open the peer (RUMOR_ESTATE)."""


class AuthError(RumorError):
    """Admission failed: certificate, key, revocation (RUMOR_EAUTH)."""


class RumorTimeout(RumorError, TimeoutError):
    """The time given passed (RUMOR_ETIMEDOUT, or a timeout of this package)."""


class NotSupported(RumorError, NotImplementedError):
    """Not supported by this build or with these settings (RUMOR_ENOTSUP)."""


_CLASSES = {_lib.RUMOR_EINVAL: SettingError, _lib.RUMOR_ELAYOUT: LayoutError, _lib.RUMOR_ECLOSED: ClosedError,
            _lib.RUMOR_ESTATE: StateError, _lib.RUMOR_EAUTH: AuthError, _lib.RUMOR_ETIMEDOUT: RumorTimeout,
            _lib.RUMOR_ENOTSUP: NotSupported}


def _raise(rc):
    message = _ffi.string(_lib.rumor_errmsg()).decode(errors="replace")
    if not message:
        message = _ffi.string(_lib.rumor_strerror(rc)).decode()
    raise _CLASSES.get(rc, RumorError)(rc, message)


def _check(rc):
    if rc != _lib.RUMOR_OK:
        _raise(rc)


def _value(v):
    if isinstance(v, bool):
        return "yes" if v else "no"
    return str(v)


def _pairs(settings):
    """Keyword settings as (name, value) text pairs: underscores become hyphens, booleans
    yes/no, a list or tuple one pair per item; None leaves a setting out."""
    out = []
    for key, v in settings.items():
        name = key.replace("_", "-")
        if v is None:
            continue
        for item in (v if isinstance(v, (list, tuple)) else [v]):
            out.append((name, _value(item)))
    return out


def settings_text(text=None, **settings):
    """The settings text (one `key = value` a line, the form of rumor's scenario files and of
    the RUMOR_SETTINGS environment variable) of text followed by keyword settings."""
    lines = [text.rstrip("\n")] if text else []
    lines += ["%s = %s" % pair for pair in _pairs(settings)]
    return "\n".join(lines) + "\n" if lines else ""


_log_sink = None


@_ffi.def_extern()
def _rumor_log_sink(arg, level, line):
    sink = _log_sink
    if sink is not None:
        try:
            sink(int(level), _ffi.string(line).decode(errors="replace"))
        except Exception:  # a sink's error must not reach the peer's thread
            pass


def set_log(sink=None, level=2):
    """Where rumor's log lines go: sink(level, line) with level 0 error .. 3 debug, or a
    logging.Logger; None: standard error (the default). Lines come from the peers' threads."""
    global _log_sink
    if sink is not None and hasattr(sink, "log"):
        import logging
        logger = sink
        levels = [logging.ERROR, logging.WARNING, logging.INFO, logging.DEBUG]
        sink = lambda lv, line: logger.log(levels[min(lv, 3)], "%s", line)  # noqa: E731
    _log_sink = sink
    if sink is None:
        _lib.rumor_set_log(_ffi.NULL, _ffi.NULL, level)
    else:
        _lib.rumor_set_log(_lib._rumor_log_sink, _ffi.NULL, level)


def _evaluation(test_acc, test_loss, val_loss, val_acc):
    """(kind, loss, acc) of what was given: both test_* (RUMOR_EVAL_TEST), both val_*
    (RUMOR_EVAL_VAL), or neither (None, 0, 0)."""
    test, val = (test_acc, test_loss), (val_loss, val_acc)
    if any(v is not None for v in test) and any(v is not None for v in val):
        raise SettingError(_lib.RUMOR_EINVAL, "an evaluation is a test or a validation one: not both")
    for kind, (loss, acc), names in ((_lib.RUMOR_EVAL_TEST, (test_loss, test_acc), "test_acc and test_loss"),
                                     (_lib.RUMOR_EVAL_VAL, (val_loss, val_acc), "val_loss and val_acc")):
        if loss is not None and acc is not None:
            return kind, float(loss), float(acc)
        if loss is not None or acc is not None:
            raise SettingError(_lib.RUMOR_EINVAL, "an evaluation needs both %s" % names)
    return None, 0.0, 0.0


class Round:
    """What a gossip point did (rumor_round_t)."""

    __slots__ = ("round", "landed", "finished", "replaced", "checkpoint_due", "neighbours", "missing",
                 "consensus", "wait_s")

    def __init__(self, io):
        for name in self.__slots__:
            v = getattr(io, name)
            setattr(self, name, bool(v) if name in ("landed", "finished", "replaced", "checkpoint_due") else v)

    def __repr__(self):
        return "Round(%s)" % ", ".join("%s=%r" % (n, getattr(self, n)) for n in self.__slots__)


class _Memory:
    """A view's memory, for numpy: the peer's buffer at an address. It holds the peer's handle,
    so the memory lives as long as any array over it does."""

    def __init__(self, handle, address, shape):
        self._handle = handle
        self.__array_interface__ = {"data": (address, False), "shape": tuple(shape), "typestr": "<f4",
                                    "version": 3}


def _destroy(handle):
    pp = _ffi.new("rumor_peer_t **", handle)
    _lib.rumor_peer_destroy(pp)


class Peer:
    """One peer of a swarm (librumor's rumor_peer_t). Settings by name, as rumor node takes
    them; `text` is the settings text (see settings_text), keyword settings come after it."""

    def __init__(self, text=None, /, **settings):
        pairs = _pairs(settings)
        keep = [_ffi.new("char[]", s.encode()) for pair in pairs for s in pair]
        arr = _ffi.new("char *[]", keep + [_ffi.NULL])
        pp = _ffi.new("rumor_peer_t **")
        _check(_lib.rumor_peer_open(text.encode() if text else _ffi.NULL, arr, pp))
        self._h = _ffi.gc(pp[0], _destroy)
        self._names = []
        self._started = self._finished = self._closed = False

    @classmethod
    def from_env(cls, **overrides):
        """A peer from the RUMOR_SETTINGS environment variable (what `rumor launch` hands each
        process), with keyword settings after it."""
        return cls(_os.environ.get("RUMOR_SETTINGS", ""), **overrides)

    def __reduce__(self):
        raise TypeError("a rumor.Peer holds sockets and a thread: it cannot be pickled (open one per process)")

    @property
    def address(self):
        """rumor://KEY@HOST:PORT: the bootstrap address of this peer for others."""
        return _ffi.string(_lib.rumor_peer_address(self._h)).decode()

    def setting(self, name):
        """A setting's value as text ("diloco:50", "yes"): as given, or the default."""
        out = _ffi.new("char **")
        _check(_lib.rumor_peer_setting(self._h, name.replace("_", "-").encode(), out))
        try:
            return _ffi.string(out[0]).decode()
        finally:
            _lib.rumor_free(out[0])

    def register(self, tensors, mix_state=False):
        """Register the model's tensors, fix the layout, and return {name: view}: float32 numpy
        arrays over the peer's buffer, holding the given values; train on the views (the peer
        mixes them in place at every round). tensors: a dict (or pairs) of name -> float32
        C-contiguous array, in an order every peer shares. mix_state: every tensor has an
        optimizer-state twin mixed with it (dadamw); then {name: (view, state_view)}."""
        import numpy as np
        items = list(tensors.items()) if hasattr(tensors, "items") else list(tensors)
        for name, a in items:
            if not isinstance(a, np.ndarray):
                raise SettingError(_lib.RUMOR_EINVAL, "tensor '%s': a numpy array, not %s" % (name, type(a).__name__))
            if a.dtype != np.float32:
                raise SettingError(_lib.RUMOR_EINVAL, "tensor '%s' is %s: rumor mixes float32 (keep a float32 copy, "
                                   "a.astype(numpy.float32))" % (name, a.dtype))
            if not a.flags.c_contiguous:
                raise SettingError(_lib.RUMOR_EINVAL, "tensor '%s' is not C-contiguous: give numpy.ascontiguousarray(a)"
                                   % name)
        for name, a in items:
            shape = _ffi.new("int64_t[]", [int(d) for d in a.shape] or [1])
            _check(_lib.rumor_peer_add_tensor(self._h, name.encode(), a.ndim, shape))
        _check(_lib.rumor_peer_commit(self._h, _lib.RUMOR_MIX_STATE if mix_state else 0))
        views = {}
        data, state = _ffi.new("float **"), _ffi.new("float **")
        for i, (name, a) in enumerate(items):
            _check(_lib.rumor_peer_view(self._h, i, data, state))
            v = np.asarray(_Memory(self._h, int(_ffi.cast("uintptr_t", data[0])), a.shape))
            v[...] = a
            if mix_state:
                s = np.asarray(_Memory(self._h, int(_ffi.cast("uintptr_t", state[0])), a.shape))
                views[name] = (v, s)
            else:
                views[name] = v
            self._names.append(name)
        return views

    def buffer(self):
        """The whole flat buffer (the model with its padding) as one float32 array."""
        import numpy as np
        p, n = _ffi.new("float **"), _ffi.new("size_t *")
        _check(_lib.rumor_peer_buffer(self._h, p, n))
        return np.asarray(_Memory(self._h, int(_ffi.cast("uintptr_t", p[0])), (n[0],)))

    def layout(self):
        """(id, text): the layout this peer announces."""
        i, t = _ffi.new("uint64_t *"), _ffi.new("char **")
        _check(_lib.rumor_peer_layout(self._h, i, t))
        try:
            return i[0], _ffi.string(t[0]).decode()
        finally:
            _lib.rumor_free(t[0])

    def _until(self, call, timeout):
        """Call call(slice_ms) until it is done: timeout None waits for ever; seconds raise
        RumorTimeout after them. Ctrl-C interrupts between slices."""
        end = None if timeout is None else _time.monotonic() + timeout
        while True:
            rc = call(_SLICE_MS)
            if rc != _lib.RUMOR_EAGAIN:
                _check(rc)
                return
            if end is not None and _time.monotonic() >= end:
                raise RumorTimeout(_lib.RUMOR_ETIMEDOUT, "not done within %g s" % timeout)

    def start(self, timeout=None):
        """Join the swarm (waits for min-peers members). True when the views now hold the
        swarm's model (a late joiner takes two confirming members' mean): reset stale
        optimizer state then."""
        joined = _ffi.new("int *")
        self._until(lambda ms: _lib.rumor_peer_start(self._h, ms, joined), timeout)
        self._started = True
        return bool(joined[0])

    def phase(self):
        """(steps, first): the local steps to take before the next round, and the position of
        the first in the swarm's learning-rate schedule."""
        steps, first = _ffi.new("int64_t *"), _ffi.new("int64_t *")
        _check(_lib.rumor_peer_phase(self._h, steps, first))
        return steps[0], first[0]

    def round(self, loss=None, samples=0, steps=0, test_acc=None, test_loss=None, timeout=None, *, val_loss=None,
              val_acc=None):
        """The gossip point: the views are mixed in place with the neighbours' models. loss:
        the summed loss over `samples` samples of the phase; test_acc and test_loss (a language
        model: val_loss and val_acc): the model's evaluation before this round, if you made one
        (both, for the peer's metrics in run-dir, which rumor sim's summary reads). A Round."""
        io = _ffi.new("rumor_round_t *")
        io.size = _ffi.sizeof("rumor_round_t")
        io.steps = int(steps)
        io.loss_sum = float(loss) if loss is not None else 0.0
        io.samples = int(samples)
        kind, l, a = _evaluation(test_acc, test_loss, val_loss, val_acc)
        if kind is not None:
            io.evaluated, io.test_loss, io.test_acc = kind, l, a
        self._until(lambda ms: _lib.rumor_peer_round(self._h, io, ms), timeout)
        return Round(io)

    def save(self, path):
        """Write the engine's state (round, push-sum weights, diloco's outer state, layout,
        the settings that fix the run) to path, atomically, owner-only: beside your model's
        checkpoint. Between rounds."""
        _check(_lib.rumor_peer_save(self._h, _os.fsencode(path)))

    def load(self, path):
        """Resume from what save wrote: after register (with the checkpointed values), before
        start. LayoutError: other tensors; SettingError: another algo, topology or seed."""
        _check(_lib.rumor_peer_load(self._h, _os.fsencode(path)))

    def status(self):
        """The peer's status as a dict: what `rumor status --json` prints for a node (members,
        counters, drops) with "train" (layout, algo, round, consensus, bytes) once started."""
        import json
        out = _ffi.new("char **")
        _check(_lib.rumor_peer_status(self._h, out))
        try:
            return json.loads(_ffi.string(out[0]).decode())
        finally:
            _lib.rumor_free(out[0])

    def evaluated(self, test_acc=None, test_loss=None, *, val_loss=None, val_acc=None):
        """The model as the views hold it now (after the last round) was evaluated: a line of
        the peer's metrics (run-dir), which rumor sim's status and summary.json show. A
        classifier: test_acc and test_loss; a language model: val_loss (nats per token) and
        val_acc (next-token accuracy), shown as a validation loss."""
        kind, loss, acc = _evaluation(test_acc, test_loss, val_loss, val_acc)
        if kind is None:
            raise SettingError(_lib.RUMOR_EINVAL, "evaluated: give test_acc and test_loss, or val_loss and val_acc")
        _check(_lib.rumor_peer_evaluated_as(self._h, kind, loss, acc))

    def finish(self):
        """No more local steps: every member is told; the model is kept for late peers."""
        _check(_lib.rumor_peer_finish(self._h))
        self._finished = True

    def wait(self, timeout=None):
        """After finish: stay until every member finished (then 2 s), or `linger` seconds."""
        self._until(lambda ms: _lib.rumor_peer_wait(self._h, ms), timeout)

    def close(self):
        """Leave the swarm now (views stay readable until the peer is garbage)."""
        if not self._closed:
            self._closed = True
            _check(_lib.rumor_peer_close(self._h))

    def __enter__(self):
        return self

    def __exit__(self, kind, value, tb):
        if kind is None and self._started and not self._closed:
            if not self._finished:
                self.finish()
            self.wait()
        self.close()
        return False
