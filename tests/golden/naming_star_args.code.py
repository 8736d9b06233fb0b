


def forward(self, x, *args, **kwargs):
    _args = args
    _kwargs = kwargs
    add = torch.add(x, _args, k = _kwargs);  x = _args = _kwargs = None
    return add
    