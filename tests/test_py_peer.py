#!/usr/bin/python3
"""The Python package rumor with numpy alone: settings by keyword and refusals with rumor's
sentence, registration's refusals, four peers (threads of this process, real CurveZMQ on
loopback, a complete graph) whose views hold the exact mean after one round, Ctrl-C in a
round, a forked child, a closed peer. usage: test_py_peer.py RUMOR PYTHON_BUILD_DIR"""
import os
import shutil
import signal
import sys
import tempfile

import pyswarm
from pyswarm import check
import threading
import time



def raises(cls, needle, fn, what):
    try:
        fn()
    except cls as e:
        check(needle in str(e), "%s: %s (%s)" % (what, cls.__name__, e))
        return e
    except Exception as e:  # noqa: BLE001
        check(False, "%s: %s instead of %s (%s)" % (what, type(e).__name__, cls.__name__, e))
        return e
    check(False, "%s: nothing raised" % what)


def main():
    rumor_exe, pydir = sys.argv[1], sys.argv[2]
    sys.path.insert(0, pydir)
    import numpy as np
    import rumor
    check(rumor.version.count(".") == 2 and rumor.protocol_version >= 3, "rumor %s, protocol %d" % (rumor.version, rumor.protocol_version))
    tmp = tempfile.mkdtemp(prefix="rumor-test-py-")
    try:
        pyswarm.make_swarm(rumor_exe, tmp, 4)

        def ident(i):
            return pyswarm.ident(tmp, i)

        e = raises(rumor.SettingError, "lr: a library peer trains nothing itself", lambda: rumor.Peer(lr=0.1, **ident(0)),
                   "a setting of rumor's own trainer")
        check(isinstance(e, ValueError) and e.code == 1, "SettingError is a ValueError with code 1 (EINVAL)")
        raises(rumor.SettingError, "local-steps", lambda: rumor.Peer(local_steps=0, **ident(0)),
               "keywords are settings: local_steps=0 is local-steps 0")
        raises(rumor.SettingError, "settings:1", lambda: rumor.Peer("what\n", **ident(0)), "a settings text line")
        text = rumor.settings_text("algo = dpsgd", local_steps=2, overlap=True, bootstrap=["a", "b"])
        check(text == "algo = dpsgd\nlocal-steps = 2\noverlap = yes\nbootstrap = a\nbootstrap = b\n",
              "settings_text: underscores, yes/no, a list one line each")

        # Registration.
        p = rumor.Peer(**ident(0))
        check(p.address.startswith("rumor://"), "address %s" % p.address)
        st = p.status()
        check(p.address.endswith(st.get("address", "?").split("tcp://")[-1]) and st.get("train", 0) is None,
              "status() before start: the node's part alone (%s)" % sorted(st))
        raises(rumor.SettingError, "float64", lambda: p.register({"w": np.zeros(4)}), "a float64 tensor")
        raises(rumor.SettingError, "C-contiguous", lambda: p.register({"w": np.zeros((4, 4), np.float32).T}),
               "a non-contiguous tensor")
        w0 = np.arange(12, dtype=np.float32).reshape(3, 4)
        v = p.register({"w": w0, "b": np.ones(5, np.float32)})
        check(np.array_equal(v["w"], w0) and v["w"].dtype == np.float32 and v["w"].shape == (3, 4),
              "register returns views holding the given values")
        check(v["w"].ctypes.data % 64 == 0 and v["b"].ctypes.data - v["w"].ctypes.data == 16 * 4,
              "views lie in one flat buffer, each from a 16-float boundary")
        raises(rumor.StateError, "fixed once committed", lambda: p.register({"x": np.ones(2, np.float32)}),
               "register twice")
        lid, ltext = p.layout()
        check(ltext == "rumor-layout-2\nw:3,4\nb:5\n", "the layout text")
        raises(rumor.StateError, "start the peer first", lambda: p.round(), "a round before start")
        pid = os.fork()
        if pid == 0:
            try:
                p.phase()
                os._exit(1)
            except rumor.StateError as e:
                os._exit(0 if "forked child" in str(e) else 1)
        _, status = os.waitpid(pid, 0)
        check(os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, "a forked child's call raises StateError")
        p.close()
        raises(rumor.ClosedError, "closed", lambda: p.round(), "a round on a closed peer")
        view = v["w"]
        del p, v
        check(float(view.sum()) == float(w0.sum()), "a view outlives its peer object (it holds the memory)")
        del view

        # Evaluations in the metrics: a classifier's test_*, a language model's val_*.
        run_dir = os.path.join(tmp, "alone")
        p = rumor.Peer(min_peers=1, run_dir=run_dir, **ident(0))
        p.register({"w": np.ones(4, np.float32)})
        p.start()
        p.evaluated(val_loss=2.5, val_acc=0.3)
        p.round(val_loss=2.25, val_acc=0.375)
        p.evaluated(test_acc=0.75, test_loss=0.5)
        raises(rumor.SettingError, "both val_loss and val_acc", lambda: p.evaluated(val_loss=1.0), "val_loss alone")
        raises(rumor.SettingError, "not both", lambda: p.evaluated(test_acc=1, test_loss=1, val_loss=1, val_acc=1),
               "a test and a validation evaluation at once")
        p.close()
        import json
        lines = [json.loads(x) for x in open(os.path.join(run_dir, "metrics.jsonl")) if x.strip()]
        said = [(x.get("val_loss"), x.get("val_acc"), x.get("test_loss"), x.get("test_acc")) for x in lines
                if "val_loss" in x or "test_loss" in x]
        check(said == [(2.5, 0.3, None, None), (2.25, 0.375, None, None), (None, None, 0.5, 0.75)],
              "the metrics name each evaluation as given: val_loss/val_acc twice (evaluated, round), then "
              "test_loss/test_acc (%s)" % said)

        # Four peers, a complete graph: one round is the exact mean.
        peers = []
        for i in range(4):
            kw = ident(i)
            if i:
                kw["bootstrap"] = peers[0].address
            peers.append(rumor.Peer("topology = complete\nmin-peers = 4\n", **kw))
        rng = np.random.default_rng(5)
        models = [{"conv.weight": rng.standard_normal((8, 1, 3, 3)).astype(np.float32),
                   "fc.weight": rng.standard_normal((10, 300)).astype(np.float32),
                   "fc.bias": rng.standard_normal(10).astype(np.float32)} for _ in range(4)]
        views = [q.register(m) for q, m in zip(peers, models)]
        errors = []

        def run(i, fn):
            try:
                fn()
            except Exception as e:  # noqa: BLE001
                errors.append((i, e))

        threads = [threading.Thread(target=run, args=(i, q.start)) for i, q in enumerate(peers)]
        [t.start() for t in threads]
        [t.join() for t in threads]
        check(not errors, "four peers started (%s)" % errors)
        # Ctrl-C during a round that cannot finish yet (nobody else has sent) interrupts it.
        old = signal.signal(signal.SIGINT, signal.default_int_handler)
        threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT)).start()
        t0 = time.monotonic()
        try:
            peers[0].round()
            check(False, "Ctrl-C in a round: nothing raised")
        except KeyboardInterrupt:
            check(time.monotonic() - t0 < 0.8, "Ctrl-C in a round raises KeyboardInterrupt at once (%.2f s)"
                  % (time.monotonic() - t0))
        signal.signal(signal.SIGINT, old)
        results = [None] * 4

        def rnd(i):
            results[i] = peers[i].round(loss=1.0, samples=10)

        threads = [threading.Thread(target=run, args=(i, lambda i=i: rnd(i))) for i in range(4)]
        [t.start() for t in threads]
        [t.join() for t in threads]
        check(not errors and all(r and r.round == 1 and r.neighbours == 3 for r in results),
              "the round (taken up again after Ctrl-C) mixed on every peer with 3 neighbours: %s" % (results[0],))
        worst = 0.0
        for name in models[0]:
            mean = np.mean([m[name].astype(np.float64) for m in models], axis=0)
            for vs in views:  # (relative to the tensor's norm: the float32 sum's rounding)
                worst = max(worst, float(np.linalg.norm(vs[name] - mean) / np.linalg.norm(mean)))
        st = peers[1].status()
        lid = "%016x" % peers[1].layout()[0]
        check(st.get("train", {}).get("round") == 1 and st["train"].get("layout") == lid and st["train"]["algo"] == "dpsgd"
              and len(st.get("view", [])) == 3, "status(): the node's JSON with its train part (round 1, layout %s, "
              "3 in view): %s" % (lid, {k: st[k] for k in list(st)[:6]}))
        check(worst <= 1e-6, "every peer holds the mean after one round (worst relative error %.2e)" % worst)
        for q in peers:
            q.finish()
        threads = [threading.Thread(target=run, args=(i, q.wait)) for i, q in enumerate(peers)]
        [t.start() for t in threads]
        [t.join() for t in threads]
        check(not errors, "every peer waits out its linger")
        for q in peers:
            with q:
                pass
        check(True, "a context manager closes a finished peer")

        # Two peers of other tensors: each start names the first that differs (LayoutError).
        a = rumor.Peer(min_peers=2, join_timeout=20, **ident(0))
        b = rumor.Peer(min_peers=2, join_timeout=20, bootstrap=a.address, **ident(1))
        a.register({"conv.weight": np.ones((8, 1, 3, 3), np.float32), "fc.weight": np.ones((10, 300), np.float32)})
        b.register({"conv.weight": np.ones((8, 1, 3, 3), np.float32), "fc.weight": np.ones((10, 200), np.float32)})
        said = [None, None]

        def start(i, q):
            try:
                q.start(timeout=15)
            except rumor.RumorError as e:
                said[i] = e

        threads = [threading.Thread(target=start, args=(i, q)) for i, q in enumerate((a, b))]
        [t.start() for t in threads]
        [t.join() for t in threads]
        check(isinstance(said[0], rumor.LayoutError) and "tensor 1 'fc.weight' is [10, 200] there and [10, 300] here"
              in str(said[0]) and isinstance(said[1], rumor.LayoutError) and
              "tensor 1 'fc.weight' is [10, 300] there and [10, 200] here" in str(said[1]),
              "peers of other tensors: both starts raise LayoutError naming it (%s; %s)" % (said[0], said[1]))
        a.close()
        b.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return pyswarm.result()


if __name__ == "__main__":
    sys.exit(main())
