


def forward(self, x):
    to = x.to(device = device(type='cpu'), dtype = torch.float16, memory_format = torch.contiguous_format);  x = None
    formats = to.formats(torch.contiguous_format, torch.channels_last, torch.channels_last_3d, torch.preserve_format);  to = None
    layouts = formats.layouts(torch.strided, torch.sparse_coo, torch.sparse_csr, layout = torch.strided);  formats = None
    return layouts
    