# Reproduces the f32 exp and tanh coefficients in plugins/cpu_jit/src/vecmath.cpp (see README.md).
import struct
import sys

import mpmath as mp

mp.mp.dps = 60


def f32(v):
    return struct.unpack("f", struct.pack("f", float(v)))[0]


def fit_exp():
    # e^r = 1 + r + r^2 g(r): fitting g rather than e^r keeps the leading 1 + r exact in
    # float, and r^2 <= 0.12 on the reduced range scales g's error down further.
    a = mp.log(2) / 2
    g = lambda r: (mp.exp(r) - 1 - r) / r**2 if r else mp.mpf(1) / 2
    poly, err = mp.chebyfit(g, [-a, a], 5, error=True)
    print("# exp: (e^r - 1 - r)/r^2 on [-ln2/2, ln2/2], degree 4, max abs err", mp.nstr(err, 5))
    print("# highest power first; vecmath.cpp appends 1.0 and evaluates (g r + 1) r + 1")
    print(" ".join(mp.nstr(c, 12) for c in poly))


# tanh x ~ x P(t)/Q(t), t = x^2, P(0) = Q(0) = 1, deg P = NP, deg Q = NQ (in t). Fitted up to
# X = 9.02, above which tanh x rounds to 1.0f. We work in s = t/X^2 in [0, 1] so that the
# linear systems stay well conditioned, and rescale the coefficients at the end.
NP, NQ = 4, 4
X = mp.mpf("9.02")


def tanh_over_x(x):  # tanh(x)/x, the even function that P/Q approximates
    return mp.tanh(x) / x


def pq(c, s):
    P = 1 + sum(c[k] * s ** (k + 1) for k in range(NP))
    Q = 1 + sum(c[NP + k] * s ** (k + 1) for k in range(NQ))
    return P, Q


def relerr(c, x):
    P, Q = pq(c, (x / X) ** 2)
    return P / (tanh_over_x(x) * Q) - 1


def solve_reference(xs, c):
    # Equioscillation on the reference, g = tanh(x)/x: P - gQ = (-1)^i E g Q. The E·Q term
    # is not linear, so use the previous Q there and iterate to the fixed point.
    N = NP + NQ
    for _ in range(50):
        A, b = mp.matrix(N + 1, N + 1), mp.matrix(N + 1, 1)
        for i, x in enumerate(xs):
            s, gv = (x / X) ** 2, tanh_over_x(x)
            for k in range(NP):
                A[i, k] = s ** (k + 1)
            for k in range(NQ):
                A[i, NP + k] = -gv * s ** (k + 1)
            A[i, N] = -((-1) ** i) * gv * pq(c, s)[1]
            b[i] = gv - 1
        sol = mp.lu_solve(A, b)
        new = [sol[k] for k in range(N)]
        done = max(abs(u - v) for u, v in zip(new, c)) < mp.mpf(10) ** -45
        c = new
        if done:
            break
    return c, sol[N]


def extrema(c, n=3000):
    # One extremum per run of constant sign on a grid, then refined by golden section:
    # the grid alone would leave the reference (and so the coefficients) off by O(1/n).
    xs = [X * i / n for i in range(1, n + 1)]
    runs = []
    for x in xs:
        e = relerr(c, x)
        if runs and (e > 0) == (runs[-1][1] > 0):
            if abs(e) > abs(runs[-1][1]):
                runs[-1] = (x, e)
        else:
            runs.append((x, e))
    h, out = X / n, []
    for x, e in runs:
        if x < X:  # at the right end point the extremum is the end point itself
            f = lambda z: -abs(relerr(c, z))
            lo, hi = max(x - h, h / 100), min(x + h, X)
            r = (mp.sqrt(5) - 1) / 2
            for _ in range(80):
                m1, m2 = hi - r * (hi - lo), lo + r * (hi - lo)
                lo, hi = (lo, m2) if f(m1) < f(m2) else (m1, hi)
            x = (lo + hi) / 2
        out.append(x)
    return out


def fit_tanh():
    # Chebyshev points in x are a good enough first reference that no Lawson/least-squares
    # start is needed. Stop when the largest extremum equals the levelled error |E|.
    N = NP + NQ
    xs = [X * (1 - mp.cos(mp.pi * (i + 1) / (N + 1))) / 2 for i in range(N + 1)]
    c = [mp.mpf(0)] * N
    for it in range(30):
        c, E = solve_reference(xs, c)
        xs = extrema(c)
        if len(xs) < N + 1:
            sys.exit("remez: only %d alternating extrema" % len(xs))
        while len(xs) > N + 1:  # drop the smaller end until N+1 alternating points remain
            xs = xs[1:] if abs(relerr(c, xs[0])) < abs(relerr(c, xs[-1])) else xs[:-1]
        emax = max(abs(relerr(c, x)) for x in xs)
        print("remez", it, "E", mp.nstr(E, 8), "max", mp.nstr(emax, 8), file=sys.stderr)
        if emax - abs(E) < abs(E) * mp.mpf("1e-6"):
            break
    # Back from s = t/X^2 to t: the coefficient of s^j is divided by X^(2j).
    a = [c[k] / X ** (2 * k + 2) for k in range(NP)]
    b = [c[NP + k] / X ** (2 * k + 2) for k in range(NQ)]
    names = ["a%d" % (2 * k + 3) for k in range(NP)] + ["b%d" % (2 * k + 2) for k in range(NQ)]
    print("# tanh: x P(x^2)/Q(x^2), [%d/%d], minimax relative error" % (NP, NQ),
          mp.nstr(emax, 6), "on [0, 9.02] (exact arithmetic)")
    print("#", " ".join(names), "rounded to float, before ulp tuning (check.c tune)")
    print(" ".join("%.9g" % f32(v) for v in a + b))


if __name__ == "__main__":
    cmds = {"exp": fit_exp, "tanh": fit_tanh}
    if len(sys.argv) != 2 or sys.argv[1] not in cmds:
        sys.exit("usage: fit.py exp|tanh")
    cmds[sys.argv[1]]()
