


def forward(self, second, first, x):
    tanh = torch.tanh(x)
    neg = torch.neg(x)
    exp = torch.exp(x)
    log = torch.log(x)
    relu = torch.relu(x);  x = None
    add = relu + neg;  neg = None
    return relu
    sigmoid = torch.sigmoid(relu);  relu = None
    