


def forward(self, x):
    floats = x.floats(1e-05, 1e+20, -0.0, inf, -inf, nan, 0.1, 1.0, 123456789.0, 1e+16, 1000000000000000.0, 1.5, -2.5e-300, 5e-324, 1.7976931348623157e+308, 0.3333333333333333, 100.0, -1000000000.0, 2.5e-05, 0.0001, 1e+22, 1.2345678901234568e+16, eps = 1e-05, neg = -0.5);  x = None
    clamp = torch.clamp(floats, min = -inf, max = inf);  floats = None
    add = clamp + nan;  clamp = None
    return add
    