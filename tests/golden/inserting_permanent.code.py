


def forward(self, x):
    log = torch.log(x)
    exp = torch.exp(x)
    neg = torch.neg(x)
    tanh = torch.tanh(neg);  neg = None
    relu = torch.relu(x);  x = None
    return relu
    sigmoid = torch.sigmoid(tanh);  tanh = None
    