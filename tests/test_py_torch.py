#!/usr/bin/python3
"""rumor.torch.Optimizer on the CPU: two peers (threads, real sockets, a complete graph) of a
small model with BatchNorm; after one step each, every parameter is the mean of the two
after-step models computed here without rumor (closed form), running_mean too (dpsgd averages
buffers); AdamW's second moment mixed with mix_state (dadamw); what is refused (float16, a
parameter replaced after start) with its sentence; diloco keeps buffers local. Skips (77)
without torch. usage: test_py_torch.py RUMOR PYTHON_BUILD_DIR"""
import shutil
import sys
import tempfile

import pyswarm
from pyswarm import check
import threading



def main():
    try:
        import torch
    except ImportError:
        print("SKIP: no torch for this python")
        return 77
    rumor_exe, pydir = sys.argv[1], sys.argv[2]
    sys.path.insert(0, pydir)
    import rumor
    import rumor.torch
    torch.set_num_threads(1)
    tmp = tempfile.mkdtemp(prefix="rumor-test-torch-")
    try:
        pyswarm.make_swarm(rumor_exe, tmp, 2)

        def net():
            torch.manual_seed(3)
            return torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.BatchNorm1d(8), torch.nn.ReLU(),
                                       torch.nn.Linear(8, 3))

        def pair(algo, make_inner, mix_state=None):
            """Two peers, each with its own batch; one step each. (models, optimizers, batches)"""
            peers = []
            for i in range(2):
                kw = pyswarm.ident(tmp, i, topology="complete", min_peers=2, algo=algo)
                if i:
                    kw["bootstrap"] = peers[0].address
                peers.append(rumor.Peer(**kw))
            models = [net() for _ in range(2)]
            opts, errors = [None, None], []

            def make(i):
                try:
                    opts[i] = rumor.torch.Optimizer(models[i], make_inner(models[i]), peers[i], mix_state=mix_state)
                except Exception as e:  # noqa: BLE001
                    errors.append(e)

            th = [threading.Thread(target=make, args=(i,)) for i in range(2)]
            [t.start() for t in th]
            [t.join() for t in th]
            if errors:
                raise errors[0]
            g = torch.Generator().manual_seed(9)
            batches = [(torch.randn(16, 6, generator=g), torch.randint(0, 3, (16,), generator=g)) for _ in range(2)]
            return peers, models, opts, batches

        def step_all(models, opts, batches):
            def one(i):
                x, y = batches[i]
                opts[i].zero_grad()
                torch.nn.functional.cross_entropy(models[i](x), y).backward()
                opts[i].step()
            th = [threading.Thread(target=one, args=(i,)) for i in range(2)]
            [t.start() for t in th]
            [t.join() for t in th]

        def alone(batches, make_inner):
            """The two after-step models without rumor, and their inner optimizers."""
            out = []
            for x, y in batches:
                m = net()
                o = make_inner(m)
                o.zero_grad()
                torch.nn.functional.cross_entropy(m(x), y).backward()
                o.step()
                out.append((m, o))
            return out

        sgd = lambda m: torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)  # noqa: E731
        peers, models, opts, batches = pair("dpsgd", sgd)
        ref = alone(batches, sgd)
        step_all(models, opts, batches)
        worst = 0.0
        for name, t in models[0].state_dict().items():
            if not t.is_floating_point():
                continue
            mean = (ref[0][0].state_dict()[name] + ref[1][0].state_dict()[name]) / 2
            for m in models:
                worst = max(worst, float((m.state_dict()[name] - mean).abs().max()))
        check(worst < 1e-6, "dpsgd: after one step each, parameters and running statistics are the mean of the two "
              "after-step models (worst %.2e)" % worst)
        check(opts[0].last_round is not None and opts[0].last_round.round == 1, "the step ran round 1")
        check("1.running_mean" in opts[0]._names and "1.num_batches_tracked" not in opts[0]._names,
              "dpsgd averages float buffers, not integer ones")
        check(models[0][0].weight.data_ptr() == opts[0]._ptrs[0], "a parameter is a view of the peer's buffer")
        # One file for the model, the inner optimizer and the engine state; a new peer resumes.
        ck = tmp + "/ck.pt"
        opts[0].save(ck)
        import os
        saved = torch.load(ck)
        check(sorted(saved) == ["model", "optimizer", "rumor"] and os.stat(ck).st_mode & 0o777 == 0o600,
              "Optimizer.save: model, optimizer and engine state in one file, owner-only")
        for p in peers:
            p.close()
        solo = rumor.Peer(key=tmp + "/p0.key", cert=tmp + "/p0.cert", swarm=tmp + "/auth/authority.pub",
                          listen="tcp://127.0.0.1:0", algo="dpsgd", topology="complete", linger=0)
        m2 = net()
        o2 = rumor.torch.Optimizer(m2, sgd(m2), solo, resume=ck)
        check(all(torch.equal(a, b) for a, b in zip(m2.state_dict().values(), models[0].state_dict().values())) and
              o2.inner.state_dict()["state"].keys() == opts[0].inner.state_dict()["state"].keys(),
              "Optimizer(resume=...) takes the model and the inner optimizer back, and the peer its engine state")
        check(solo.phase()[1] == 1, "the resumed peer's schedule goes on from its round (1)")
        solo.close()
        try:
            rumor.torch.Optimizer(net(), sgd(net()), rumor.Peer(key=tmp + "/p0.key", cert=tmp + "/p0.cert",
                                  swarm=tmp + "/auth/authority.pub", listen="tcp://127.0.0.1:0", algo="sgp"), resume=ck)
            check(False, "resume with another algo: nothing raised")
        except rumor.SettingError as e:
            check("algo is dpsgd there and sgp here" in str(e), "resume with another algo: %s" % e)
        w = models[0][0].weight
        w.data = torch.zeros(3, 3)
        try:
            opts[0].round()
            check(False, "a parameter replaced after start: nothing raised")
        except rumor.LayoutError as e:
            check("'0.weight'" in str(e), "a parameter replaced after start: LayoutError naming it (%s)" % e)

        adamw = lambda m: torch.optim.AdamW(m.parameters(), lr=0.01)  # noqa: E731
        peers, models, opts, batches = pair("dpsgd", adamw, mix_state="exp_avg_sq")
        ref = alone(batches, adamw)
        step_all(models, opts, batches)
        worst = 0.0
        for pi, (p0, p1) in enumerate(zip(ref[0][0].parameters(), ref[1][0].parameters())):
            mean = (ref[0][1].state[p0]["exp_avg_sq"] + ref[1][1].state[p1]["exp_avg_sq"]) / 2
            for m, o in zip(models, opts):
                q = list(m.parameters())[pi]
                worst = max(worst, float((o.inner.state[q]["exp_avg_sq"] - mean).abs().max() / mean.abs().max()))
        check(worst < 1e-5, "dadamw: AdamW's exp_avg_sq after a round is the mean of the two (worst relative %.2e)" % worst)
        for p in peers:
            p.close()

        peers, models, opts, batches = pair("diloco:4", sgd)
        check("1.running_mean" not in opts[0]._names and "1.weight" in opts[0]._names,
              "diloco keeps buffers local by default (parameters mixed)")
        for p in peers:
            p.close()

        p = rumor.Peer(key=tmp + "/p0.key", cert=tmp + "/p0.cert", swarm=tmp + "/auth/authority.pub",
                       listen="tcp://127.0.0.1:0")
        try:
            rumor.torch.Optimizer(net().half(), torch.optim.SGD(net().parameters(), lr=0.1), p)
            check(False, "a float16 model: nothing raised")
        except rumor.SettingError as e:
            check("float16" in str(e) and "float32" in str(e), "a float16 model is refused: %s" % e)
        p.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return pyswarm.result()


if __name__ == "__main__":
    sys.exit(main())
