


def forward(self, x):
    to = x.to(device(type='cpu'));  x = None
    to_1 = to.to(device = device(type='cuda', index=0));  to = None
    devices = to_1.devices(device(type='cuda'), device(type='cpu', index=1));  to_1 = None
    return devices
    