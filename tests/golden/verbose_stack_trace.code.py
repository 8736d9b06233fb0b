


def forward(self, x):
    relu = torch.relu(x);  x = None
    add = relu + 1;  relu = None
    neg = torch.neg(add);  add = None
    sigmoid = torch.sigmoid(neg);  neg = None
    return sigmoid
    