


def forward(self, x):
    w = self.w
    relu = torch.relu(x);  x = None
    sub = self.sub(relu, scale = w);  relu = w = None
    view = sub.view(-1);  sub = None
    return view
    