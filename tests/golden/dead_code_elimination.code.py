


def forward(self, x, y):
    gt = x > 0
    _assert = torch._assert(gt, 'x must be positive');  gt = None
    add = x + 1;  x = None
    return add
    