


def forward(self, x, y = 3):
    lin_weight = self.lin.weight
    add = torch.add(x, y, alpha = 2);  x = y = None
    sigmoid = torch.sigmoid(add);  add = None
    relu = sigmoid.relu();  sigmoid = None
    lin = self.lin(relu);  relu = None
    getitem = lin[slice(None, 2, None)];  lin = None
    neg = torch.neg(getitem);  getitem = None
    cat = torch.cat([neg, neg], dim = -1);  neg = None
    return (cat, {'w': lin_weight})
    