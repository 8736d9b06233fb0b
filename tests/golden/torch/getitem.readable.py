class GetItem(torch.nn.Module):
    def forward(self, x):
        
        # No stacktrace found for following nodes 
        size = x.size(0)
        getattr_1 = x.shape
        getitem = getattr_1[1];  getattr_1 = None
        view = x.view(size, -1)
        getitem_1 = x[(slice(None, None, None), slice(1, 3, None))]
        getitem_2 = x[(Ellipsis, None, 0)]
        getitem_3 = view[0]
        size_1 = x.size()
        getitem_4 = size_1[-1];  size_1 = None
        reshape = view.reshape(size, getitem, -1);  view = size = getitem = None
        sum_1 = getitem_1.sum();  getitem_1 = None
        add = reshape + sum_1;  reshape = sum_1 = None
        mean = getitem_2.mean();  getitem_2 = None
        add_1 = add + mean;  add = mean = None
        max_1 = getitem_3.max();  getitem_3 = None
        mul = max_1 * getitem_4;  max_1 = getitem_4 = None
        add_2 = add_1 + mul;  add_1 = mul = None
        dim = x.dim();  x = None
        return (add_2, dim)
        