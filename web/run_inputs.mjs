// web/run_inputs.mjs — the Run tab's per-input controls (dimensions, and where each input's data
// comes from) and the specs the model worker builds the tensors from (web/worker.mjs userInput).
const $ = (id) => document.getElementById(id);

/** One row per model input: its dimensions (symbolic ones start at 1) and where its data comes from. */
export function renderRunInputs(inputs) {
  const box = $('run-inputs');
  box.replaceChildren();
  for (const inp of inputs) {
    const row = document.createElement('div');
    row.className = 'run-input';
    row.dataset.input = inp.name;
    row.dataset.dtype = inp.dtype ?? 'float32';
    const declared = inp.declared ?? inp.shape ?? [];
    const dims = declared.map((d) => (Number.isInteger(d) ? d : 1)).join(', ');
    row.innerHTML = `<b class="mono"></b> <span class="mono dtype"></span> <input class="dims mono" size="14" aria-label="dimensions">
      <select class="source" aria-label="data"><option value="random">random</option><option value="zeros">zeros</option>
        <option value="values">values / token ids</option><option value="file">.npy / .pb file</option><option value="image">image</option></select>
      <input class="seed" type="number" value="0" size="4" aria-label="seed" title="seed">
      <input class="values mono" size="24" placeholder="1, 2, 3 (a dimension '?' takes the count)" hidden>
      <input class="file" type="file" accept=".npy,.pb" hidden>
      <input class="image" type="file" accept="image/*" hidden>
      <label class="imagenet" hidden><input type="checkbox" checked> ImageNet mean/std</label>`;
    row.querySelector('b').textContent = inp.name;
    row.querySelector('.dtype').textContent = `${inp.dtype ?? '?'}[${declared.join(', ')}]`;
    row.querySelector('.dims').value = dims;
    const source = row.querySelector('.source');
    source.addEventListener('change', () => {
      const v = source.value;
      row.querySelector('.seed').hidden = v !== 'random';
      row.querySelector('.values').hidden = v !== 'values';
      row.querySelector('.file').hidden = v !== 'file';
      row.querySelector('.image').hidden = v !== 'image';
      row.querySelector('.imagenet').hidden = v !== 'image';
    });
    box.append(row);
  }
}

/** The Run tab's inputs as the worker's specs (files read, images decoded). */
export async function runSpecs() {
  const specs = [];
  for (const row of $('run-inputs').querySelectorAll('.run-input')) {
    const shape = row.querySelector('.dims').value.split(',').map((d) => d.trim()).filter(Boolean).map((d) => (/^\d+$/.test(d) ? Number(d) : null));
    const spec = { name: row.dataset.input, dtype: row.dataset.dtype, shape, source: row.querySelector('.source').value };
    if (spec.source === 'random') spec.seed = Number(row.querySelector('.seed').value) || 0;
    if (spec.source === 'values') spec.values = row.querySelector('.values').value;
    if (spec.source === 'file' || spec.source === 'image') {
      const f = row.querySelector(spec.source === 'file' ? '.file' : '.image').files[0];
      if (!f) throw new Error(`choose a file for input '${spec.name}'`);
      if (spec.source === 'file') spec.bytes = await f.arrayBuffer();
      else {
        spec.image = await createImageBitmap(f);
        spec.imagenet = row.querySelector('.imagenet input').checked;
      }
    }
    specs.push(spec);
  }
  return specs;
}

