"""rumor.torch: a torch.optim optimizer whose steps a swarm mixes.

    model = Net()
    inner = torch.optim.AdamW(model.parameters(), lr=1e-3)
    with rumor.Peer.from_env() as peer:
        opt = rumor.torch.Optimizer(model, inner, peer)   # registers the model, joins the swarm
        for x, y in loader:
            opt.zero_grad()
            loss = loss_fn(model(x), y)
            loss.backward()
            opt.step(loss=loss)                           # the local step; a gossip round when due

What is mixed: the model's parameters (state_dict order, tied weights once) and, when
`buffers` is true, its float32 buffers (BatchNorm's running statistics). The default averages
buffers for dpsgd, sgp and CHOCO and keeps them local for diloco, whose outer Nesterov step on
running_var could drive it below zero. Integer buffers (num_batches_tracked) stay local.

Memory: on the CPU the parameters become views of the peer's buffer (no copy, ever). On a GPU
they become views of one flat device tensor; each round copies it to the peer's page-locked
host buffer and back (two copies of the model per round, nothing per step).
"""
import tempfile as _tempfile
import weakref as _weakref

import torch as _torch

from . import LayoutError, RumorError, SettingError, _lib


class Optimizer:
    """Wrap `inner` (any torch.optim optimizer over model's parameters): step() takes its step
    and, every phase's steps (peer.phase()), runs the peer's gossip round on the model.
    mix_state="exp_avg_sq": the inner optimizer's second moment is mixed with the model (the
    swarm's algo must be dpsgd: decentralized AdamW). resume: a file that save() wrote (the
    model, the inner optimizer and the peer's engine state are taken back from it). The peer
    is started here."""

    def __init__(self, model, inner, peer, *, buffers=None, mix_state=None, resume=None):
        self.model, self.inner, self.peer = model, inner, peer
        saved = None
        if resume is not None:
            saved = _torch.load(resume)
            model.load_state_dict(saved["model"])
            inner.load_state_dict(saved["optimizer"])
        self.mix_state = mix_state
        algo = peer.setting("algo")
        if buffers is None:
            buffers = not algo.startswith("diloco")
        params = {id(p) for p in model.parameters()}
        chosen, seen = [], set()
        for name, t in model.state_dict(keep_vars=True).items():
            if id(t) in seen:
                continue  # a tied weight, registered once
            is_param = id(t) in params
            if not is_param and (not buffers or not t.is_floating_point()):
                continue
            if t.dtype != _torch.float32:
                raise SettingError(_lib.RUMOR_EINVAL, "%s '%s' is %s: rumor mixes float32 (keep a float32 master "
                                   "copy: model.float())" % ("parameter" if is_param else "buffer", name, t.dtype))
            seen.add(id(t))
            chosen.append((name, t))
        devices = {t.device for _, t in chosen}
        if len(devices) > 1:
            raise SettingError(_lib.RUMOR_EINVAL, "the model's tensors are on %s: put it on one device" %
                               ", ".join(sorted(str(d) for d in devices)))
        self.device = devices.pop() if devices else _torch.device("cpu")
        arrays = {name: t.detach().to("cpu").contiguous().numpy() for name, t in chosen}
        views = peer.register(arrays, mix_state=bool(mix_state))
        self._names = [name for name, _ in chosen]
        self._tensors = [t for _, t in chosen]
        host = _torch.from_numpy(peer.buffer())
        self._host = host
        if self.device.type == "cpu":
            for name, t in chosen:
                v = views[name][0] if mix_state else views[name]
                t.data = _torch.from_numpy(v)
            self._flat = None
        else:
            # One flat device tensor laid out as the host buffer; the host buffer pinned once.
            self._flat = host.to(self.device)
            cudart = _torch.cuda.cudart()
            self._pinned = int(cudart.cudaHostRegister(host.data_ptr(), host.numel() * 4, 0)) == 0
            if self._pinned:  # (unpinned before the buffer can go: this object holds it)
                _weakref.finalize(self, cudart.cudaHostUnregister, host.data_ptr())
            for name, t in chosen:
                v = views[name][0] if mix_state else views[name]
                off = (v.ctypes.data - host.data_ptr()) // 4
                t.data = self._flat[off:off + v.size].view(t.shape)
        self._ptrs = [t.data_ptr() for t in self._tensors]
        self._shapes = [tuple(t.shape) for t in self._tensors]
        self._state_views = [views[name][1] for name in self._names] if mix_state else None
        self.last_round = None
        self._left = None
        self._loss, self._losses = None, 0
        if saved is not None:
            _with_file(saved["rumor"], peer.load, resume)
        self.joined = peer.start()
        if self.joined and self._flat is not None:
            self._flat.copy_(host)

    # -- what torch.optim.Optimizer users call
    @property
    def param_groups(self):
        return self.inner.param_groups

    @property
    def state(self):
        return self.inner.state

    def zero_grad(self, set_to_none=True):
        self.inner.zero_grad(set_to_none=set_to_none)

    def state_dict(self):
        return self.inner.state_dict()

    def load_state_dict(self, state):
        self.inner.load_state_dict(state)

    def step(self, closure=None, *, loss=None):
        """The inner optimizer's step; the gossip round once the phase's steps are taken.
        loss: this step's loss (a tensor or a number, the batch's mean), or the closure's:
        their mean over the phase is the round's loss in the peer's metrics and status (added
        on the tensor's device, read once a round). Returns what the inner step returns."""
        ret = self.inner.step(closure)
        if loss is None:
            loss = ret
        if loss is not None:
            loss = loss.detach() if isinstance(loss, _torch.Tensor) else float(loss)
            self._loss = loss if self._loss is None else self._loss + loss
            self._losses += 1
        if self._left is None:
            self._left, _ = self.peer.phase()
        self._left -= 1
        if self._left <= 0:
            self.last_round = self.round()
        return ret

    def round(self):
        """The gossip round now (step() calls it when due): the model mixed in place."""
        for name, t, ptr, shape in zip(self._names, self._tensors, self._ptrs, self._shapes):
            if t.data_ptr() != ptr or tuple(t.shape) != shape:
                raise LayoutError(_lib.RUMOR_ELAYOUT, "tensor '%s' no longer is the peer's view (shape %s, was %s): "
                                  "a registered tensor must not be replaced or resized" % (name, tuple(t.shape), shape))
        if self._state_views is not None:
            self._copy_state(into_views=True)
        if self._flat is not None:
            self._host.copy_(self._flat)
        loss, self._loss, losses, self._losses = self._loss, None, self._losses, 0
        r = self.peer.round(loss=None if loss is None else float(loss), samples=losses)
        if self._flat is not None:
            self._flat.copy_(self._host)
        if self._state_views is not None:
            self._copy_state(into_views=False)
        self._left = None
        return r

    def _copy_state(self, into_views):
        for name, t, sv in zip(self._names, self._tensors, self._state_views):
            st = self.inner.state.get(t, {}).get(self.mix_state)
            if st is None:
                continue
            if into_views:
                sv[...] = st.detach().to("cpu").numpy().reshape(sv.shape)
            else:
                st.copy_(_torch.from_numpy(sv).view(st.shape))

    def finish(self):
        """No more steps: the peer tells the swarm (see rumor.Peer.finish)."""
        self.peer.finish()

    def save(self, path):
        """The model, the inner optimizer's state and the peer's engine state in one file
        (torch.save), written atomically and readable by its owner only; resume=path takes it
        back. Between rounds (after a step)."""
        import os
        d = os.path.dirname(os.path.abspath(path))
        fd, tmp = _tempfile.mkstemp(dir=d, prefix="rumor-save-", suffix=".tmp")  # (torch refuses names of a leading dot)
        os.close(fd)
        try:
            self.peer.save(tmp)
            with open(tmp, "rb") as f:
                engine = f.read()
            _torch.save({"model": self.model.state_dict(), "optimizer": self.inner.state_dict(), "rumor": engine}, tmp)
            os.chmod(tmp, 0o600)
            os.replace(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)


def _with_file(data, fn, near):
    """fn(path) of a private temporary file holding data, beside `near`."""
    import os
    fd, tmp = _tempfile.mkstemp(dir=os.path.dirname(os.path.abspath(near)), prefix=".rumor-load-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        try:
            fn(tmp)
        except RumorError as e:  # (the file the user named, not the scratch copy)
            e.message = e.message.replace(tmp, near)
            e.args = (e.message,)
            raise
    finally:
        os.unlink(tmp)
