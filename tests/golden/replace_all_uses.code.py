


def forward(self, x):
    tanh = torch.tanh(x)
    relu = torch.relu(x);  x = None
    neg = torch.neg(relu)
    add = tanh + neg;  tanh = None
    exp = torch.exp(neg);  neg = None
    return (exp, relu)
    