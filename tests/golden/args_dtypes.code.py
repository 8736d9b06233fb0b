


def forward(self, x):
    to = x.to(torch.float16);  x = None
    dtypes = to.dtypes(torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8, torch.bool, torch.complex32, torch.complex64, torch.complex128, torch.qint8, torch.quint8, torch.qint32, dtype = torch.int64);  to = None
    return dtypes
    