


def forward(self, x, y):
    gt = x > y;  y = None
    invert = ~gt;  gt = None
    pos = +x;  x = None
    neg = -pos;  pos = None
    return (invert, neg)
    