


def forward(self, x, y, z):
    add = x + y
    mul = y * z;  y = None
    cat = torch.cat([mul, add, z], extra = x);  mul = add = z = x = None
    relu = torch.relu(cat);  cat = None
    neg = torch.neg(relu)
    return (relu, neg)
    