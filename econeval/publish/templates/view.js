const items=[...document.querySelectorAll('details.item')];
const f={task:document.getElementById('f-task'),outcome:document.getElementById('f-outcome'),
         group:document.getElementById('f-group'),text:document.getElementById('f-text')};
function apply(){let n=0;const q=f.text.value.toLowerCase();
 for(const el of items){const ok=(!f.task.value||el.dataset.task===f.task.value)&&
  (!f.outcome.value||el.dataset.outcome===f.outcome.value)&&(!f.group.value||el.dataset.group===f.group.value)&&
  (!q||el.textContent.toLowerCase().includes(q));el.hidden=!ok;if(ok)n++;}
 document.getElementById('count').textContent=n+' of '+items.length+' items';}
for(const k in f){f[k].addEventListener(k==='text'?'input':'change',apply);}
apply();
