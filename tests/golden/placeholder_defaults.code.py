


def forward(self, x, y = None, alpha = 2.0, s = 'abc', t = (1, 'a'), n = -3, flag = True):
    f = x.f(y, alpha, s, t, n, flag);  x = y = alpha = s = t = n = flag = None
    return f
    