


def forward(self, x, y = 3):
    lin_weight = self.lin.weight
    add = torch.add(x, 5, alpha = 1, out = None);  x = None
    relu = add.relu();  add = None
    lin = self.lin(relu);  relu = None
    getitem = lin[slice(None, 2, None)];  lin = None
    cat = torch.cat([getitem, getitem], dim = -1);  getitem = None
    return (cat, {'w': lin_weight})
    